/**
 * Live progress from ACP children: a scripted agent that works visibly, a misbehaving one
 * whose progress is wrong, and real `dsh acp` children (the built CLI on a scripted model).
 */
import { existsSync, mkdtempSync, writeFileSync } from 'node:fs'
import { tmpdir } from 'node:os'
import { join } from 'node:path'
import { afterEach, describe, expect, it, vi } from 'vitest'
import { text } from '@dsh/llm'
import { SubagentService } from '@dsh/subagent'
import { AcpProvider, AcpProviderConfig, resolveAcpSpec } from '@dsh/subagent-acp'
import { createHarness, type Harness } from '@dsh/testkit/harness'
import { endOf, listenToChildren, textOf, updatesOf, type Heard } from '@dsh/testkit/delegation'
import { dshMain, FAST, fixture } from './helpers.js'

let harness: Harness | undefined
afterEach(async () => {
  await harness?.dispose()
  harness = undefined
})

async function world(args: string[]): Promise<{ h: Harness; heard: Heard[]; dropped: string[] }> {
  const h = (harness = await createHarness())
  await h.plugin(SubagentService, { progressIntervalMs: 20 })
  const dropped: string[] = []
  const spec = resolveAcpSpec(AcpProviderConfig({ ...FAST, command: process.execPath, args }))
  h.ctx.subagents.registerProvider(new AcpProvider('acp', { ...spec, progressDropped: (reason) => dropped.push(reason) }))
  return { h, heard: listenToChildren(h.ctx), dropped }
}

describe('acp: live progress', () => {
  it('plan, tool calls, text and usage arrive in order before subagent/end, each attributed to its own child (two at once)', async () => {
    const { h, heard, dropped } = await world([fixture('agent.mjs'), 'progress'])
    const parent = await h.agent()
    const [first, second] = await Promise.all(['first', 'second'].map((prompt) => h.ctx.subagents.start('acp', { prompt: [text(prompt)], parent, signal: new AbortController().signal })))
    const [a, b] = await Promise.all([first!.result, second!.result])
    const usage = { inputTokens: 300, outputTokens: 40, cachedInputTokens: 120 }
    expect(a).toEqual({ output: [text('first: all done')], stopReason: 'completed', usage })
    expect(b).toEqual({ output: [text('second: all done')], stopReason: 'completed', usage })
    for (const [run, prompt] of [[first!, 'first'], [second!, 'second']] as const) {
      const updates = updatesOf(heard, run.id)
      const mine = heard.filter((entry) => entry.info.id === run.id)
      expect(mine.at(-1)!.kind).toBe('end')
      expect(endOf(heard, run.id)).toBeGreaterThan(heard.findLastIndex((entry) => entry.kind === 'progress' && entry.info.id === run.id))
      expect(updates.filter((update) => update.kind !== 'text' && update.kind !== 'status')).toEqual([
        { kind: 'tool-start', callId: 'read-1', name: 'Read notes.md', args: '{"path":"notes.md"}' },
        { kind: 'tool-end', callId: 'read-1', name: 'Read notes.md', ok: true },
        // No title: the kind names it.
        { kind: 'tool-start', callId: 'grep-1', name: 'search' },
        { kind: 'tool-end', callId: 'grep-1', name: 'search', ok: false },
        { kind: 'usage', usage },
      ])
      const statuses = updates.filter((update) => update.kind === 'status')
      expect(statuses.at(-1)).toEqual({ kind: 'status', text: 'plan: 1/2 done — answer' })
      expect(textOf(updates)).toBe(`${prompt}: all done`)
      // Paced work is reported while it happens: more than one event per child.
      expect(mine.filter((entry) => entry.kind === 'progress').length).toBeGreaterThan(1)
    }
    expect(dropped).toEqual([])
    await Promise.all([first!.dispose(), second!.dispose()])
  })

  it('updates for unknown tool calls, second starts and ends, malformed updates and malformed usage are dropped and logged; the run completes', async () => {
    const { h, heard, dropped } = await world([fixture('bad-progress-agent.mjs')])
    // The SDK reports a schema-invalid update on stderr; it must not reach the run.
    const sdkLog = vi.spyOn(console, 'error').mockImplementation(() => {})
    try {
      const run = await h.ctx.subagents.start('acp', { prompt: [text('go')], parent: await h.agent(), signal: new AbortController().signal })
      expect(await run.result).toEqual({ output: [text('survived')], stopReason: 'completed' })
      expect(updatesOf(heard, run.id)).toEqual([
        { kind: 'tool-start', callId: 'run-1', name: 'Run tests', args: '{"cmd":"npm test"}' },
        { kind: 'tool-end', callId: 'run-1', name: 'Run tests', ok: true },
        { kind: 'text', text: 'survived' },
      ])
      expect(dropped).toEqual([
        'a tool_call_update for "ghost", a tool call never announced',
        'a second tool_call for "run-1"',
        'a second end of tool call "run-1"',
        expect.stringContaining('a prompt response whose _meta.dsh.usage is not { inputTokens, outputTokens, cachedInputTokens } in whole tokens'),
      ])
      await run.dispose()
    } finally {
      sdkLog.mockRestore()
    }
  })

  it('a real `dsh acp` child on a scripted model: its tool call and text arrive before subagent/end, two children at once', async () => {
    if (!existsSync(dshMain)) throw new Error(`${dshMain} is missing: build first (npx tsc -b packages/cli/dsh)`)
    const dir = mkdtempSync(join(tmpdir(), 'acp-progress-'))
    const script = join(dir, 'child.yml')
    writeFileSync(
      script,
      [
        '- when: { prompt: "^count" }',
        '  reply:',
        '    - text: "Let me count."',
        '      call: { tool: bash, args: { command: "echo one two three" } }',
        '      delay_ms: 300',
        '    - { text: "Three words, as counted by the shell.", delay_ms: 300 }',
      ].join('\n'),
    )
    const { h, heard } = await world([dshMain, 'acp', '--model', `scripted:${script}`, '--session-dir', join(dir, 'sessions')])
    const parent = await h.agent()
    const runs = await Promise.all(['count words', 'count lines'].map((prompt) => h.ctx.subagents.start('acp', { prompt: [text(prompt)], parent, signal: new AbortController().signal })))
    const results = await Promise.all(runs.map((run) => run.result))
    for (const [index, run] of runs.entries()) {
      expect(results[index]!.stopReason).toBe('completed')
      const updates = updatesOf(heard, run.id)
      expect(endOf(heard, run.id)).toBeGreaterThan(heard.findLastIndex((entry) => entry.kind === 'progress' && entry.info.id === run.id))
      const start = updates.findIndex((update) => update.kind === 'tool-start')
      const end = updates.findIndex((update) => update.kind === 'tool-end')
      expect(updates[start]).toMatchObject({ kind: 'tool-start', name: 'bash', args: expect.stringContaining('echo one two three') })
      // `permission: reject` (the default) answers dsh's permission ask: the call ends failed.
      expect(updates[end]).toMatchObject({ kind: 'tool-end', callId: (updates[start] as { callId: string }).callId, name: 'bash' })
      expect(start).toBeLessThan(end)
      expect(textOf(updates)).toBe('Let me count.Three words, as counted by the shell.')
    }
    expect(new Set(runs.map((run) => run.id)).size).toBe(2)
    await Promise.all(runs.map((run) => run.dispose()))
  })
})
