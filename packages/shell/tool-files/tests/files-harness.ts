/**
 * What the file tools' tests share: a real harness (the scripted model is the only fake)
 * with the file tools loaded, and a temporary directory per test that an agent works in.
 */
import { mkdtemp, mkdir, rm, writeFile } from 'node:fs/promises'
import { tmpdir } from 'node:os'
import { dirname, join } from 'node:path'
import { createHarness, type Harness } from '@dsh/testkit/harness'
import type { Agent } from '@dsh/agent'
import { textOf } from '@dsh/llm'
import type { SandboxSpec } from '@dsh/session'
import { FilesToolPlugin, type FilesToolConfig } from '@dsh/tool-files'

export interface ToolCall {
  tool: string
  args: Record<string, unknown>
}

export interface CallResult {
  text: string
  isError: boolean
}

const made: string[] = []
let live: Harness | undefined

export async function cleanUp(): Promise<void> {
  await live?.dispose()
  live = undefined
  await Promise.all(made.splice(0).map((path) => rm(path, { recursive: true, force: true })))
}

export async function tempDir(prefix = 'dsh-tool-files-'): Promise<string> {
  const dir = await mkdtemp(join(tmpdir(), prefix))
  made.push(dir)
  return dir
}

/** Files under `dir`, by relative path; parents are made. */
export async function files(dir: string, contents: Record<string, string | Buffer>): Promise<void> {
  for (const [path, content] of Object.entries(contents)) {
    await mkdir(dirname(join(dir, path)), { recursive: true })
    await writeFile(join(dir, path), content)
  }
}

export interface RunOptions {
  config?: Partial<FilesToolConfig>
  /** Plugins loaded before the file tools (the approval broker). */
  before?: (harness: Harness) => Promise<void>
  sandbox?: SandboxSpec
  /** Run once the file tools are loaded (a router on ctx.files). */
  after?: (harness: Harness) => void
}

/**
 * One agent in `cwd` whose model makes `calls` (one step each, in order), then answers:
 * the results the model was given, in order.
 */
export async function runCalls(cwd: string, calls: ToolCall[], options: RunOptions = {}): Promise<{ results: CallResult[]; agent: Agent; harness: Harness }> {
  await live?.dispose()
  const harness = await createHarness({ script: [{ reply: [...calls.map((call) => ({ call })), { text: 'done' }] }] })
  live = harness
  await options.before?.(harness)
  await harness.plugin(FilesToolPlugin, options.config ?? {})
  options.after?.(harness)
  const agent = await harness.agent({ meta: { cwd, ...(options.sandbox && { sandbox: options.sandbox }) } })
  await agent.followup('go')
  const results = agent.session.events().flatMap((event) => (event.type === 'tool/result' ? [{ text: textOf(event.result.content), isError: event.result.isError === true }] : []))
  return { results, agent, harness }
}

/** The one result of one call. */
export async function call(cwd: string, tool: string, args: Record<string, unknown>, options: RunOptions = {}): Promise<CallResult> {
  const { results } = await runCalls(cwd, [{ tool, args }], options)
  if (results.length !== 1) throw new Error(`expected one result, got ${JSON.stringify(results)}`)
  return results[0]!
}
