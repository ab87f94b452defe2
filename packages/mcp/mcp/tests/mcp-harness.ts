/**
 * What the MCP client's tests share: a real harness (the scripted model is the only fake),
 * the approval broker when a test asks for it, the MCP plugin over the fixture server (the
 * SDK's own server classes, a real process), and the warnings the plugin logged.
 */
import { mkdtemp, rm } from 'node:fs/promises'
import { tmpdir } from 'node:os'
import { join } from 'node:path'
import { fileURLToPath } from 'node:url'
import { createHarness, type Harness } from '@dsh/testkit/harness'
import type { Agent } from '@dsh/agent'
import { ApprovalService } from '@dsh/approvals'
import { textOf } from '@dsh/llm'
import McpPlugin, { type McpConfig } from '@dsh/mcp'

export const FIXTURE = fileURLToPath(new URL('./fixtures/server.mjs', import.meta.url))

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

export async function tempDir(): Promise<string> {
  const dir = await mkdtemp(join(tmpdir(), 'dsh-mcp-'))
  made.push(dir)
  return dir
}

/** The fixture as a stdio server entry; `env` is what the entry hands it. */
export function fixtureServer(env: Record<string, string> = {}, args: string[] = []): Record<string, unknown> {
  return { command: process.execPath, args: [FIXTURE, ...args], env, readOnlyHints: true }
}

export interface McpRun {
  harness: Harness
  warnings: string[]
}

/** A harness whose model makes `calls` (one step each), with the broker (when `approvals` is given) and the MCP plugin. */
export async function startMcp(config: Partial<McpConfig>, options: { calls?: ToolCall[]; approvals?: Partial<ApprovalService.Config> } = {}): Promise<McpRun> {
  await live?.dispose()
  const harness = await createHarness({ script: [{ reply: [...(options.calls ?? []).map((call) => ({ call })), { text: 'done' }] }] })
  live = harness
  const warnings: string[] = []
  harness.ctx.logger.exporter({ colors: 0, levels: { default: 2 }, export: (message) => void warnings.push(String(message.args.join(' '))) } as Parameters<typeof harness.ctx.logger.exporter>[0])
  if (options.approvals) await harness.plugin(ApprovalService, options.approvals)
  await harness.plugin(McpPlugin, config)
  return { harness, warnings }
}

/** One agent plays the script: the results the model was given, in order. */
export async function runAgent(run: McpRun): Promise<{ results: CallResult[]; agent: Agent }> {
  const agent = await run.harness.agent()
  await agent.followup('go')
  const results = agent.session.events().flatMap((event) => (event.type === 'tool/result' ? [{ text: textOf(event.result.content), isError: event.result.isError === true }] : []))
  return { results, agent }
}

/** `calls` against the fixture server named `srv`: the results, in order. */
export async function callFixture(calls: ToolCall[], config: Partial<McpConfig> = {}, approvals?: Partial<ApprovalService.Config>): Promise<CallResult[]> {
  const run = await startMcp({ servers: { srv: fixtureServer() }, ...config }, { calls, ...(approvals && { approvals }) })
  return (await runAgent(run)).results
}
