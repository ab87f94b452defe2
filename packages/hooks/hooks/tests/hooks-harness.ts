/**
 * What the hooks tests share: a real harness (the scripted model is the only fake) with the
 * real bash tool, the approval broker, the hooks plugin, and the notes it logged. Hook
 * commands are real shell commands writing into a temporary directory.
 */
import { existsSync, readFileSync } from 'node:fs'
import { mkdtemp, rm } from 'node:fs/promises'
import { tmpdir } from 'node:os'
import { join } from 'node:path'
import { createHarness, type Harness } from '@dsh/testkit/harness'
import type { Agent } from '@dsh/agent'
import { ApprovalService, type ApprovalFrontEnd } from '@dsh/approvals'
import { BashService } from '@dsh/bash'
import { textOf } from '@dsh/llm'
import { BashToolPlugin } from '@dsh/tool-bash'
import HooksPlugin, { type HooksConfig } from '@dsh/hooks'

const made: string[] = []
let live: Harness | undefined

export async function cleanUp(): Promise<void> {
  await live?.dispose()
  live = undefined
  await Promise.all(made.splice(0).map((path) => rm(path, { recursive: true, force: true })))
}

export async function tempDir(): Promise<string> {
  const dir = await mkdtemp(join(tmpdir(), 'dsh-hooks-'))
  made.push(dir)
  return dir
}

/** One `{ matcher, hooks: [{ type: command, command }] }` group. */
export function group(command: string, matcher?: string, timeout?: number): Record<string, unknown> {
  return { ...(matcher !== undefined && { matcher }), hooks: [{ type: 'command', command, ...(timeout !== undefined && { timeout }) }] }
}

export interface HookedRun {
  harness: Harness
  notes: string[]
  /** The results the model was given, in order. */
  results: { text: string; isError: boolean }[]
  agent: Agent
}

/** The model runs each of `commands` through bash (one step each), under the broker (`approvals`, answered by `frontEnd` when given) and the hooks plugin (`hooks`). */
export async function runWithHooks(commands: string[], hooks: Partial<HooksConfig>, approvals: Partial<ApprovalService.Config> = { default: 'allow' }, frontEnd?: ApprovalFrontEnd): Promise<HookedRun> {
  await live?.dispose()
  const harness = await createHarness({ script: [{ reply: [...commands.map((command) => ({ call: { tool: 'bash', args: { command } } })), { text: 'done' }] }] })
  live = harness
  const notes: string[] = []
  harness.ctx.logger.exporter({ colors: 0, levels: { default: 2 }, export: (message) => void notes.push(String(message.args.join(' '))) } as Parameters<typeof harness.ctx.logger.exporter>[0])
  await harness.plugin(BashService)
  await harness.plugin(BashToolPlugin)
  await harness.plugin(ApprovalService, approvals)
  await harness.plugin(HooksPlugin, hooks)
  if (frontEnd) harness.ctx.approvals.addFrontEnd(frontEnd)
  const agent = await harness.agent()
  await agent.followup('go')
  const results = agent.session.events().flatMap((event) => (event.type === 'tool/result' ? [{ text: textOf(event.result.content), isError: event.result.isError === true }] : []))
  return { harness, notes, results, agent }
}

/**
 * A hook command appending its input to `file` as one line. One `printf` is one write, so
 * hooks running at once (the hooks of one event, or of calls close together) never
 * interleave their lines, as `cat >> f; echo >> f` would.
 */
export function appendInput(file: string): string {
  return `line=$(cat); printf '%s\\n' "$line" >> ${file}`
}

/** The JSON lines `appendInput` hooks wrote to `file` (none yet: empty). */
export function inputsIn(file: string): Record<string, unknown>[] {
  if (!existsSync(file)) return []
  return readFileSync(file, 'utf8').split('\n').filter(Boolean).map((line) => JSON.parse(line) as Record<string, unknown>)
}
