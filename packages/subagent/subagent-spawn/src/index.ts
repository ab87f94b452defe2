export { SpawnPlugin, SpawnProvider, IN_PROCESS_CAPABILITIES } from './plugin.js'
export { SpawnPlugin as default } from './plugin.js'
// The one-shot in-process run, which `@dsh/subagent-fork` shares.
export { startInProcessRun, type InProcessOptions } from './in-process-run.js'
export { STRUCTURED_OUTPUT_TOOL } from './structured-output.js'
