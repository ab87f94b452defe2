import { mkdtemp } from 'node:fs/promises'
import { tmpdir } from 'node:os'
import { join } from 'node:path'
import { afterEach, describe, expect, it } from 'vitest'
import type { Harness } from '@dsh/testkit/harness'
import { createDelegationHarness, cleanUp, listenToChildren, type Heard } from '@dsh/testkit/delegation'
import { text } from '@dsh/llm'
import type { SubagentProgressInfo, SubagentRunEndInfo } from '@dsh/subagent'
import { SpawnPlugin } from '@dsh/subagent-spawn'
import SessionJsonl from '@dsh/session-jsonl'

// Each child streams text, calls a tool, waits a little (so progress is spread over
// several intervals) and answers.
const childReplies = (name: string) => [
  { text: `${name} is looking around`, call: { tool: 'noop', args: { who: name } } },
  { delay_ms: 60, text: `${name} is done` },
]
const SCRIPT = [
  { when: { prompt: '^alpha' }, reply: childReplies('alpha') },
  { when: { prompt: '^beta' }, reply: childReplies('beta') },
]

let harness: Harness | undefined
let dir: string | undefined
afterEach(async () => {
  await cleanUp(harness, dir)
  harness = dir = undefined
})

async function setUp(script: unknown = SCRIPT): Promise<{ h: Harness; heard: Heard[] }> {
  const h = (harness = await createDelegationHarness({ script: script as never, sessionDir: false, subagents: { progressIntervalMs: 20 }, plugins: [[SpawnPlugin, {}]] }))
  h.ctx.tools.register({ name: 'noop', description: 'does nothing', parameters: { type: 'object' }, concurrencySafe: true, execute: () => 'nothing to see' })
  return { h, heard: listenToChildren(h.ctx) }
}

const progressOf = (heard: Heard[], runId: string) => heard.flatMap((entry) => (entry.kind === 'progress' && entry.info.runId === runId ? entry.info.updates : []))

describe('live progress of spawn children', () => {
  it('arrives before each child\'s subagent/end, in order, attributed to the right child', async () => {
    const { h, heard } = await setUp()
    const parent = await h.agent()
    const signal = new AbortController().signal
    const runs = await Promise.all(['alpha', 'beta'].map((name) => h.ctx.subagents.start('spawn', { prompt: [text(`${name} task`)], parent, signal, label: name })))
    await Promise.all(runs.map((run) => run.result))
    await new Promise((resolve) => setImmediate(resolve))

    for (const [index, name] of ['alpha', 'beta'].entries()) {
      const run = runs[index]!
      const start = heard.find((entry) => entry.kind === 'start' && entry.info.id === run.id)!
      const runId = start.info.runId
      const positions = heard.flatMap((entry, position) => (entry.info.runId === runId ? [{ kind: entry.kind, position }] : []))
      expect(positions[0]!.kind).toBe('start')
      expect(positions.at(-1)!.kind).toBe('end')
      expect(positions.filter((entry) => entry.kind === 'progress').length).toBeGreaterThan(0)
      for (const entry of heard) if (entry.kind === 'progress' && entry.info.runId === runId) expect(entry.info).toMatchObject({ id: run.id, label: name, provider: 'spawn', parentId: parent.id })

      const updates = progressOf(heard, runId)
      const order = updates.map((update) => (update.kind === 'text' ? `text:${update.text}` : update.kind === 'usage' ? 'usage' : `${update.kind}:${'name' in update ? update.name : ''}`))
      const textSeen = updates.flatMap((update) => (update.kind === 'text' ? [update.text] : [])).join('')
      // The other child's words never show up under this one.
      expect(textSeen).toBe(`${name} is looking around${name} is done`)
      const toolStart = order.indexOf('tool-start:noop')
      const toolEnd = order.indexOf('tool-end:noop')
      expect(toolStart).toBeGreaterThan(-1)
      expect(toolEnd).toBeGreaterThan(toolStart)
      expect(order.findIndex((entry) => entry === `text:${name} is done` || entry.endsWith(`${name} is done`))).toBeGreaterThan(toolEnd)
      const started = updates.find((update) => update.kind === 'tool-start')!
      expect(started).toMatchObject({ kind: 'tool-start', name: 'noop', args: JSON.stringify({ who: name }) })
      expect(updates.find((update) => update.kind === 'tool-end')).toMatchObject({ ok: true })
    }
  })

  it('sums the child\'s token usage into subagent/end, and its last usage update says the same', async () => {
    const { h, heard } = await setUp()
    const parent = await h.agent()
    const run = await h.ctx.subagents.start('spawn', { prompt: [text('alpha task')], parent, signal: new AbortController().signal })
    await run.result
    const child = h.ctx.agents.get(run.id)!
    let inputTokens = 0
    let outputTokens = 0
    for (const event of child.session.ownEvents()) {
      if (event.type === 'assistant/message' && event.usage) {
        inputTokens += event.usage.inputTokens
        outputTokens += event.usage.outputTokens
      }
    }
    expect(inputTokens).toBeGreaterThan(0)
    const end = heard.find((entry) => entry.kind === 'end')!.info as SubagentRunEndInfo
    expect(end.usage).toEqual({ inputTokens, outputTokens, cachedInputTokens: 0 })
    const usages = heard.flatMap((entry) => (entry.kind === 'progress' ? entry.info.updates.filter((update) => update.kind === 'usage') : []))
    expect(usages.at(-1)).toEqual({ kind: 'usage', usage: end.usage })
  })

  it('reports usage on subagent/end even when nobody listens to progress', async () => {
    const h = (harness = await createDelegationHarness({ script: SCRIPT as never, sessionDir: false, plugins: [[SpawnPlugin, {}]] }))
    h.ctx.tools.register({ name: 'noop', description: 'does nothing', parameters: { type: 'object' }, execute: () => 'ok' })
    const ends: SubagentRunEndInfo[] = []
    h.ctx.on('subagent/end', (info) => void ends.push(info))
    const run = await h.ctx.subagents.start('spawn', { prompt: [text('beta task')], parent: await h.agent(), signal: new AbortController().signal })
    await run.result
    expect(ends[0]!.usage!.inputTokens).toBeGreaterThan(0)
    expect(ends[0]!.usage!.outputTokens).toBeGreaterThan(0)
  })

  it('reports a failed tool call as ended not ok, with its error shortened', async () => {
    const { h, heard } = await setUp([{ reply: [{ call: { tool: 'explode', args: {} } }, { text: 'recovered' }] }])
    h.ctx.tools.register({ name: 'explode', description: 'fails', parameters: { type: 'object' }, execute: () => { throw new Error(`boom ${'!'.repeat(500)}`) } })
    const run = await h.ctx.subagents.start('spawn', { prompt: [text('anything')], parent: await h.agent(), signal: new AbortController().signal })
    await run.result
    const ended = heard.flatMap((entry) => (entry.kind === 'progress' ? entry.info.updates : [])).find((update) => update.kind === 'tool-end')
    expect(ended).toMatchObject({ kind: 'tool-end', name: 'explode', ok: false })
    expect(ended!.kind === 'tool-end' && ended!.detail).toMatch(/boom/)
    expect((ended as { detail: string }).detail.length).toBeLessThanOrEqual(160)
  })

  it('gives a caller observer the run\'s progress without any event listener', async () => {
    const h = (harness = await createDelegationHarness({ script: SCRIPT as never, sessionDir: false, subagents: { progressIntervalMs: 20 }, plugins: [[SpawnPlugin, {}]] }))
    h.ctx.tools.register({ name: 'noop', description: 'does nothing', parameters: { type: 'object' }, execute: () => 'ok' })
    const observed: SubagentProgressInfo[] = []
    const run = await h.ctx.subagents.start('spawn', { prompt: [text('alpha task')], parent: await h.agent(), signal: new AbortController().signal, onProgress: (info) => observed.push(info) })
    await run.result
    const textSeen = observed.flatMap((info) => info.updates.flatMap((update) => (update.kind === 'text' ? [update.text] : []))).join('')
    expect(textSeen).toBe('alpha is looking aroundalpha is done')
    expect(observed.every((info) => info.id === run.id)).toBe(true)
  })

  it('streams each turn of a continuable child, marked continuable, before that turn\'s end', async () => {
    const { h, heard } = await setUp([{ when: { prompt: '^alpha' }, reply: childReplies('alpha') }])
    dir = await mkdtemp(join(tmpdir(), 'dsh-progress-'))
    await h.plugin(SessionJsonl, { dir })
    const parent = await h.agent()
    const turnEnded = new Promise<void>((resolve) => h.ctx.on('subagent/end', () => resolve()))
    {
      const { childId } = await h.ctx.subagents.startContinuable({ provider: 'spawn', label: 'keeper', request: { prompt: [text('alpha task')], parent }, signal: new AbortController().signal })
      await turnEnded
      const start = heard.find((entry) => entry.kind === 'start')!
      expect(start.info).toMatchObject({ id: childId, continuable: true })
      const runEntries = heard.filter((entry) => entry.info.runId === start.info.runId)
      expect(runEntries.at(-1)!.kind).toBe('end')
      const progress = runEntries.filter((entry): entry is Extract<Heard, { kind: 'progress' }> => entry.kind === 'progress')
      expect(progress.length).toBeGreaterThan(0)
      expect(progress.every((entry) => entry.info.continuable === true)).toBe(true)
      expect(progress.flatMap((entry) => entry.info.updates).some((update) => update.kind === 'tool-start' && update.name === 'noop')).toBe(true)
      expect((runEntries.at(-1)!.info as SubagentRunEndInfo).usage!.inputTokens).toBeGreaterThan(0)
    }
  })
})
