import v8 from 'node:v8'
import { runInNewContext } from 'node:vm'
import { describe, expect, it } from 'vitest'
import type { SubagentProgress, SubagentProgressInfo, SubagentRunInfo } from '@dsh/subagent'
// The channel is the service's own part: tested directly.
import { MAX_PENDING, MAX_TEXT, ProgressChannel } from '../src/progress/channel.js'

const RUN: SubagentRunInfo = { runId: 'run-1', provider: 'test', id: 'child-1', local: false, parentId: 'parent-1' }

function collector(intervalMs: number) {
  const events: SubagentProgressInfo[] = []
  const malformed: string[] = []
  const channel = new ProgressChannel({ intervalMs, emit: (info) => events.push(info), onMalformed: (reason) => malformed.push(reason) })
  return { channel, events, malformed }
}

const nextEvent = (events: unknown[], count: number) =>
  new Promise<void>((resolve) => {
    const poll = () => (events.length >= count ? resolve() : setTimeout(poll, 5))
    poll()
  })

describe('a progress channel', () => {
  it('holds updates until the run is published, then hands them on under its identity', async () => {
    const { channel, events } = collector(10)
    channel.report({ kind: 'status', text: 'starting' })
    await new Promise((resolve) => setTimeout(resolve, 30))
    expect(events).toEqual([])
    channel.bind(RUN)
    await nextEvent(events, 1)
    expect(events[0]).toMatchObject({ ...RUN, seq: 1, updates: [{ kind: 'status', text: 'starting' }] })
    channel.close()
  })

  it('merges adjacent text, keeps only the latest usage and status, and keeps the order of everything else', () => {
    const { channel, events } = collector(60_000)
    channel.bind(RUN)
    // The first flush is due at once (timer 0); close() flushes synchronously before it fires.
    const updates: SubagentProgress[] = [
      { kind: 'text', text: 'Let me ' },
      { kind: 'text', text: 'look.' },
      { kind: 'usage', usage: { inputTokens: 10, outputTokens: 1, cachedInputTokens: 0 } },
      { kind: 'tool-start', callId: 'c1', name: 'bash', args: '{"command":"ls"}' },
      { kind: 'status', text: 'step 1 of 2' },
      { kind: 'tool-end', callId: 'c1', name: 'bash', ok: true },
      { kind: 'usage', usage: { inputTokens: 30, outputTokens: 5, cachedInputTokens: 8 } },
      { kind: 'status', text: 'step 2 of 2' },
      { kind: 'text', text: 'Done.' },
    ]
    for (const update of updates) channel.report(update)
    channel.close()
    expect(events).toHaveLength(1)
    expect(events[0]!.updates).toEqual([
      { kind: 'text', text: 'Let me look.' },
      { kind: 'tool-start', callId: 'c1', name: 'bash', args: '{"command":"ls"}' },
      { kind: 'tool-end', callId: 'c1', name: 'bash', ok: true },
      { kind: 'usage', usage: { inputTokens: 30, outputTokens: 5, cachedInputTokens: 8 } },
      { kind: 'status', text: 'step 2 of 2' },
      { kind: 'text', text: 'Done.' },
    ])
  })

  it('emits what is pending on close and nothing after it', async () => {
    const { channel, events } = collector(60_000)
    channel.bind(RUN)
    channel.report({ kind: 'text', text: 'last words' })
    channel.close()
    channel.report({ kind: 'text', text: 'too late' })
    channel.close()
    await new Promise((resolve) => setTimeout(resolve, 20))
    expect(events.map((event) => event.updates)).toEqual([[{ kind: 'text', text: 'last words' }]])
  })

  it('drops malformed updates with a reason and keeps the run going', () => {
    const { channel, events, malformed } = collector(60_000)
    channel.bind(RUN)
    const garbage: unknown[] = [null, 'text', { kind: 'tool-start' }, { kind: 'usage', usage: { inputTokens: -1, outputTokens: 0, cachedInputTokens: 0 } }, { kind: 'item/unknown', text: 'x' }, { text: 'no kind' }]
    for (const update of garbage) channel.report(update as SubagentProgress)
    channel.report({ kind: 'text', text: 'still here' })
    channel.close()
    expect(malformed).toHaveLength(garbage.length)
    expect(malformed.join('\n')).toMatch(/unknown kind "item\/unknown"/)
    expect(events.map((event) => event.updates)).toEqual([[{ kind: 'text', text: 'still here' }]])
  })

  it('bounds what waits between two emissions and counts what it left out', () => {
    const { channel, events } = collector(60_000)
    channel.bind(RUN)
    for (let i = 0; i < 1000; i++) {
      channel.report({ kind: 'tool-start', callId: `c${i}`, name: 'grep', args: 'x'.repeat(10_000) })
      channel.report({ kind: 'text', text: 'y'.repeat(100) })
    }
    channel.close()
    const [batch] = events
    expect(batch!.updates.length).toBeLessThanOrEqual(MAX_PENDING)
    for (const update of batch!.updates) {
      if (update.kind === 'text') expect(update.text.length).toBeLessThanOrEqual(MAX_TEXT)
      if (update.kind === 'tool-start') expect(update.args!.length).toBeLessThanOrEqual(160)
    }
    // The newest survive: the last call is there.
    expect(batch!.updates.some((update) => update.kind === 'tool-start' && update.callId === 'c999')).toBe(true)
    expect(batch!.dropped!.updates + batch!.updates.filter((update) => update.kind === 'tool-start').length).toBe(1000)
  })

  it('coalesces a child streaming 10,000 deltas a second to the configured rate, in flat memory', async () => {
    const intervalMs = 100
    const events: SubagentProgressInfo[] = []
    // A listener that keeps only what it needs (the count and the sizes), as a tree would.
    const channel = new ProgressChannel({ intervalMs, emit: (info) => void events.push({ ...info, updates: info.updates.map((update) => (update.kind === 'text' ? { kind: 'text', text: String(update.text.length) } : update)) }), onMalformed: () => {} })
    const sizes = (event: SubagentProgressInfo) => event.updates.reduce((n, update) => n + (update.kind === 'text' ? Number(update.text) : 0), 0)
    channel.bind(RUN)
    v8.setFlagsFromString('--expose-gc')
    const gc = runInNewContext('gc') as () => void
    gc()
    const heapBefore = process.memoryUsage().heapUsed
    const started = performance.now()
    let sent = 0
    let sentChars = 0
    // About a second of deltas at 10,000 a second, in bursts of 100 every 10 ms.
    while (performance.now() - started < 1000) {
      for (let i = 0; i < 100; i++) {
        const delta = `token${sent++} ${'x'.repeat(90)} `
        sentChars += delta.length
        channel.report({ kind: 'text', text: delta })
      }
      await new Promise((resolve) => setTimeout(resolve, 10))
    }
    const elapsed = performance.now() - started
    gc()
    const heapGrowth = process.memoryUsage().heapUsed - heapBefore
    channel.close()
    expect(sent).toBeGreaterThan(1000)
    // Megabytes went through; what stays is the bounded buffer, not the stream.
    expect(sentChars).toBeGreaterThan(50 * MAX_TEXT)
    expect(heapGrowth).toBeLessThan(2 * 1024 * 1024)
    // One emission per interval at most, plus the leading one and the one `close` makes.
    expect(events.length).toBeLessThanOrEqual(Math.floor(elapsed / intervalMs) + 2)
    expect(events.length).toBeGreaterThan(1)
    for (const event of events) expect(sizes(event)).toBeLessThanOrEqual(MAX_TEXT)
    // Nothing was lost silently: what arrived plus what was counted out is what was sent.
    const arrived = events.reduce((sum, event) => sum + sizes(event), 0)
    const counted = events.reduce((sum, event) => sum + (event.dropped?.textChars ?? 0), 0)
    expect(arrived + counted).toBe(sentChars)
    expect(events.map((event) => event.seq)).toEqual(events.map((_, index) => index + 1))
  })
})
