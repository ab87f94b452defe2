/**
 * Loading a workflow file: a JavaScript module (`.js`, `.mjs`) whose default export is
 * `async (api) => result`. TypeScript is not supported yet: Node 20 cannot load it without
 * a compiler, and dsh ships none; the refusal says to compile it first.
 */
import { readFile } from 'node:fs/promises'
import { extname, resolve } from 'node:path'
import { errorMessage } from '@dsh/base'
import { WorkflowError } from './errors.js'
import { sha256 } from './keys.js'

export interface LoadedWorkflow {
  /** The file, absolute. */
  file: string
  /** Its text when it was loaded, and the text's SHA-256 (what a resume compares). */
  source: string
  hash: string
  run: (api: unknown) => unknown
  /** The module's `options` export, when it has one (`{ rerunSideEffects: true }`). */
  options: { rerunSideEffects?: boolean }
}

const LOADABLE = new Set(['.js', '.mjs'])

export async function loadWorkflow(path: string): Promise<LoadedWorkflow> {
  const file = resolve(path)
  const extension = extname(file)
  if (extension === '.ts' || extension === '.mts' || extension === '.cts') {
    throw new WorkflowError('LOAD', `workflow ${path}: TypeScript workflows are not supported yet (Node 20 cannot load .ts without a compiler); compile it to .mjs first (npx tsc or esbuild) and run that`)
  }
  if (!LOADABLE.has(extension)) throw new WorkflowError('LOAD', `workflow ${path}: a workflow is a JavaScript module ending in .js or .mjs (got "${extension || 'no extension'}")`)
  let source: string
  try {
    source = await readFile(file, 'utf8')
  } catch (error) {
    throw new WorkflowError('LOAD', `workflow ${path} cannot be read: ${errorMessage(error)}`)
  }
  let module: Record<string, unknown>
  try {
    // By absolute path: the bundled CLI turns import() into require(), which takes no URL
    // (ESM loads through require(esm), Node >= 20.19: so no top-level await).
    module = (await import(file)) as Record<string, unknown>
  } catch (error) {
    const first = errorMessage(error).split('\n')[0]
    const hint = extension === '.js' && /export|import/.test(first ?? '') ? ' (a .js file with import/export needs "type": "module" in its package.json; or name it .mjs)' : ''
    throw new WorkflowError('LOAD', `workflow ${path} does not load: ${first}${hint}`, { cause: error })
  }
  // A CommonJS file's module.exports arrives as the default export (twice wrapped through require).
  let run = module.default
  if (run !== null && typeof run === 'object' && typeof (run as { default?: unknown }).default === 'function') run = (run as { default: unknown }).default
  if (typeof run !== 'function') throw new WorkflowError('LOAD', `workflow ${path} has no default export function (export default async ({ agent, parallel, bestOf }) => { ... })`)
  const options = module.options !== null && typeof module.options === 'object' ? (module.options as { rerunSideEffects?: unknown }) : {}
  return { file, source, hash: sha256(source), run: run as (api: unknown) => unknown, options: { ...(options.rerunSideEffects === true && { rerunSideEffects: true }) } }
}

/** What changed between two versions of a workflow file, in one line: the lines that differ. */
export function describeChange(before: string, after: string): string {
  const a = before.split('\n')
  const b = after.split('\n')
  let head = 0
  while (head < a.length && head < b.length && a[head] === b[head]) head++
  let tail = 0
  while (tail < a.length - head && tail < b.length - head && a[a.length - 1 - tail] === b[b.length - 1 - tail]) tail++
  const from = head + 1
  const toNow = b.length - tail
  const toBefore = a.length - tail
  const span = (start: number, end: number) => (end < start ? `nothing (at line ${start})` : end === start ? `line ${start}` : `lines ${start}-${end}`)
  return `${span(from, toBefore)} then, ${span(from, toNow)} now (${a.length} lines before, ${b.length} now)`
}
