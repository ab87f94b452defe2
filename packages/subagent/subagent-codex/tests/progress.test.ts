/**
 * Live progress from a Codex child: the real app-server against the fake Responses server
 * (paced, so the run takes a while), and a stand-in server for what the real one will not
 * send on demand (items without a type, ends without starts).
 */
import { mkdtempSync } from 'node:fs'
import { tmpdir } from 'node:os'
import { join } from 'node:path'
import { fileURLToPath } from 'node:url'
import { afterEach, describe, expect, it } from 'vitest'
import { text } from '@dsh/llm'
import { SubagentService, type SubagentRun } from '@dsh/subagent'
import { startFakeOpenAIResponses, type FakeOpenAIResponses } from '@dsh/testkit'
import { createHarness, type Harness } from '@dsh/testkit/harness'
import { listenToChildren, updatesOf } from '@dsh/testkit/delegation'
import { CodexConfig, CodexPlugin, CodexProvider } from '../src/index.js'
import { codexHome } from './helpers.js'

const fakeServer = fileURLToPath(new URL('./fixtures/fake-app-server.mjs', import.meta.url))

let harness: Harness | undefined
let fake: FakeOpenAIResponses | undefined
const runs: SubagentRun[] = []
afterEach(async () => {
  await Promise.all(runs.splice(0).map((run) => run.dispose()))
  await harness?.dispose()
  await fake?.close()
  harness = undefined
  fake = undefined
})

describe('codex: live progress', () => {
  it('a real app-server\'s command, text and usage arrive in order, before subagent/end, attributed to the run', async () => {
    // A command (declined by the default permission mode: its item still starts and ends), then a paced answer.
    fake = await startFakeOpenAIResponses([
      { toolCalls: [{ callId: 'call_ls', name: 'exec_command', arguments: { cmd: 'touch progress.txt' } }], usage: { inputTokens: 50, outputTokens: 7 } },
      { text: 'The directory holds nothing of note.', eventDelayMs: 150, usage: { inputTokens: 80, outputTokens: 9 } },
    ])
    const home = codexHome(fake.url)
    harness = await createHarness()
    await harness.plugin(SubagentService, { progressIntervalMs: 20 })
    await harness.plugin(CodexPlugin, { env: { CODEX_HOME: home, HOME: home, FAKE_CODEX_API_KEY: 'sk-fake' }, graceMs: 500 })
    const heard = listenToChildren(harness.ctx)
    const parent = await harness.agent({ meta: { cwd: mkdtempSync(join(tmpdir(), 'dsh-codex-work-')) } })
    const run = await harness.ctx.subagents.start('codex', { prompt: [text('look around')], parent, signal: new AbortController().signal })
    runs.push(run)
    const result = await run.result
    expect(result).toMatchObject({ stopReason: 'completed', output: [text('The directory holds nothing of note.')] })
    expect(result.usage).toEqual({ inputTokens: 130, outputTokens: 16, cachedInputTokens: 0 })

    expect(heard.at(-1)).toMatchObject({ kind: 'end', info: { id: run.id, usage: result.usage } })
    const updates = updatesOf(heard, run.id)
    // Several events while the answer streamed: progress was live, not one batch at the end.
    expect(heard.filter((entry) => entry.kind === 'progress').length).toBeGreaterThan(2)
    const start = updates.findIndex((update) => update.kind === 'tool-start')
    const end = updates.findIndex((update) => update.kind === 'tool-end')
    const firstText = updates.findIndex((update) => update.kind === 'text')
    expect(updates[start]).toMatchObject({ kind: 'tool-start', name: 'command', args: expect.stringContaining('touch progress.txt') })
    expect(updates[end]).toMatchObject({ kind: 'tool-end', callId: (updates[start] as { callId: string }).callId, name: 'command', ok: false, detail: 'declined' })
    expect(start).toBeLessThan(end)
    expect(end).toBeLessThan(firstText)
    const streamed = updates.filter((update) => update.kind === 'text').map((update) => (update as { text: string }).text).join('')
    expect(streamed).toBe('The directory holds nothing of note.')
    expect(updates.filter((update) => update.kind === 'usage').at(-1)).toEqual({ kind: 'usage', usage: result.usage })
    // The events of one run are numbered in order.
    const seqs = heard.flatMap((entry) => (entry.kind === 'progress' ? [entry.info.seq] : []))
    expect(seqs).toEqual(seqs.map((_, index) => index + 1))
  })

  it('items without a type, of an unknown type, ended without a start or twice, and malformed usage or plans are dropped and logged; the run completes', async () => {
    harness = await createHarness()
    await harness.plugin(SubagentService, { progressIntervalMs: 10 })
    const dropped: string[] = []
    harness.ctx.subagents.registerProvider(new CodexProvider(CodexConfig({ graceMs: 200 }), { command: process.execPath, args: [fakeServer, 'bad-progress'], version: 'fake' }, { progressDropped: (reason) => dropped.push(reason) }))
    const heard = listenToChildren(harness.ctx)
    const parent = await harness.agent()
    const run = await harness.ctx.subagents.start('codex', { prompt: [text('hi')], parent, signal: new AbortController().signal })
    runs.push(run)
    expect(await run.result).toEqual({ output: [text('still fine')], stopReason: 'completed' })
    expect(updatesOf(heard, run.id)).toEqual([
      { kind: 'tool-start', callId: 'c1', name: 'command', args: 'ls -la' },
      { kind: 'tool-end', callId: 'c1', name: 'command', ok: true },
      { kind: 'text', text: 'still fine' },
    ])
    expect(dropped).toEqual([
      'item/started: an item without a type',
      'item/started: an item of unknown type "teleport"',
      'item/started: an item that is not an object',
      'item/completed for "never-started", an item that never started',
      'item/completed for "c1" a second time',
      'thread/tokenUsage/updated: a tokenUsage without whole inputTokens, outputTokens and cachedInputTokens in last and total',
      'turn/plan/updated: a plan that is not a list of { step, status }',
    ])
  })
})
