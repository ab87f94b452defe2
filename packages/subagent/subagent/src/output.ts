/**
 * The shared output-selection rule lives in `@dsh/llm` (it is what "the answer" of any run
 * of turns is); re-exported here because every provider and consumer of the seam uses it.
 */
export { outputText, selectOutput } from '@dsh/llm'
