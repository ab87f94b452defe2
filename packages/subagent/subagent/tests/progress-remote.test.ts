import { mkdtemp } from 'node:fs/promises'
import { tmpdir } from 'node:os'
import { join } from 'node:path'
import { afterEach, describe, expect, it } from 'vitest'
import type { Harness } from '@dsh/testkit/harness'
import { createDelegationHarness, cleanUp } from '@dsh/testkit/delegation'
import { text, type TextBlock } from '@dsh/llm'
import SessionJsonl from '@dsh/session-jsonl'
import {
  NO_CAPABILITIES,
  type ProgressSink,
  type RemoteConversation,
  type SubagentProgress,
  type SubagentProgressInfo,
  type SubagentProvider,
  type SubagentRequest,
  type SubagentResult,
  type SubagentRun,
  type SubagentRunEndInfo,
} from '@dsh/subagent'

const USAGE = { inputTokens: 120, outputTokens: 30, cachedInputTokens: 100 }

/**
 * A package-local remote provider: it reports what a transport would (a status line before
 * the run is published, a tool call, text, usage, and one garbage update) through whatever
 * sink the service handed it, and remembers whether it was handed one.
 */
class ReportingProvider implements SubagentProvider {
  readonly name = 'remote'
  readonly capabilities = NO_CAPABILITIES
  readonly inheritsParentContext = false
  readonly sinks: Array<ProgressSink | undefined> = []

  async start(request: SubagentRequest): Promise<SubagentRun> {
    const sink = request.progress
    this.sinks.push(sink)
    sink?.report({ kind: 'status', text: 'connecting' })
    const result = (async (): Promise<SubagentResult> => {
      await this.narrate(sink)
      return { output: [text('remote answer')], stopReason: 'completed', usage: USAGE }
    })()
    return { id: `remote:${this.sinks.length}`, local: false, result, cancel: () => {}, dispose: async () => {} }
  }

  async prepareContinuable(): Promise<{ kind: 'remote'; conversation: RemoteConversation }> {
    const conversation: RemoteConversation = {
      remoteId: 'conv-1',
      send: async (_message: TextBlock[], sink?: ProgressSink): Promise<SubagentResult> => {
        this.sinks.push(sink)
        await this.narrate(sink)
        return { output: [text('turn answer')], stopReason: 'completed', usage: USAGE }
      },
      cancel: () => {},
      dispose: async () => {},
    }
    return { kind: 'remote', conversation }
  }

  private async narrate(sink: ProgressSink | undefined): Promise<void> {
    const steps: SubagentProgress[] = [
      { kind: 'tool-start', callId: 't1', name: 'read_file', args: '{"path":"a.ts"}' },
      { kind: 'tool-end', callId: 't1', name: 'read_file', ok: true },
      { kind: 'text', text: 'remote ' },
      { kind: 'text', text: 'answer' },
      { kind: 'usage', usage: USAGE },
    ]
    for (const step of steps) {
      await new Promise((resolve) => setTimeout(resolve, 5))
      sink?.report(step)
    }
    // A transport speaking garbage: dropped, never the end of the run.
    sink?.report({ kind: 'tool-end', callId: 't9' } as unknown as SubagentProgress)
  }
}

let harness: Harness | undefined
let dir: string | undefined
afterEach(async () => {
  await cleanUp(harness, dir)
  harness = dir = undefined
})

async function setUp(): Promise<{ h: Harness; provider: ReportingProvider }> {
  const h = (harness = await createDelegationHarness({ sessionDir: false, subagents: { progressIntervalMs: 10 } }))
  const provider = new ReportingProvider()
  h.ctx.subagents.registerProvider(provider)
  return { h, provider }
}

describe('progress through a remote provider', () => {
  it('hands a provider no sink when nobody listens', async () => {
    const { h, provider } = await setUp()
    const run = await h.ctx.subagents.start('remote', { prompt: [text('go')], parent: await h.agent(), signal: new AbortController().signal })
    await run.result
    expect(provider.sinks).toEqual([undefined])
  })

  it('ignores a sink the caller put in the request', async () => {
    const { h, provider } = await setUp()
    const foreign: ProgressSink = { report: () => {} }
    const run = await h.ctx.subagents.start('remote', { prompt: [text('go')], parent: await h.agent(), signal: new AbortController().signal, progress: foreign })
    await run.result
    expect(provider.sinks).toEqual([undefined])
  })

  it('carries what the transport reported, including before publication, ahead of subagent/end, and drops garbage', async () => {
    const { h } = await setUp()
    const heard: Array<{ kind: 'progress'; info: SubagentProgressInfo } | { kind: 'end'; info: SubagentRunEndInfo }> = []
    h.ctx.on('subagent/progress', (info) => void heard.push({ kind: 'progress', info }))
    h.ctx.on('subagent/end', (info) => void heard.push({ kind: 'end', info }))
    const run = await h.ctx.subagents.start('remote', { prompt: [text('go')], parent: await h.agent(), signal: new AbortController().signal })
    const result = await run.result
    expect(result.stopReason).toBe('completed')
    expect(heard.at(-1)!.kind).toBe('end')
    const updates = heard.flatMap((entry) => (entry.kind === 'progress' ? entry.info.updates : []))
    expect(updates[0]).toEqual({ kind: 'status', text: 'connecting' })
    // In the order the transport produced them (text may arrive split over several events).
    const firsts = ['status', 'tool-start', 'tool-end', 'text', 'usage'].map((kind) => updates.findIndex((update) => update.kind === kind))
    expect(firsts.every((index) => index >= 0)).toBe(true)
    expect([...firsts].sort((a, b) => a - b)).toEqual(firsts)
    expect(updates.filter((update) => update.kind === 'text').map((update) => (update as { text: string }).text).join('')).toBe('remote answer')
    expect(heard.filter((entry) => entry.kind === 'progress').every((entry) => entry.info.id === run.id)).toBe(true)
    expect((heard.at(-1)!.info as SubagentRunEndInfo).usage).toEqual(USAGE)
  })

  it('streams a remote continuable child\'s turn and records its usage on the parent-side record', async () => {
    const { h, provider } = await setUp()
    dir = await mkdtemp(join(tmpdir(), 'dsh-progress-remote-'))
    await h.plugin(SessionJsonl, { dir })
    const heard: Array<{ kind: 'progress'; info: SubagentProgressInfo } | { kind: 'end'; info: SubagentRunEndInfo }> = []
    h.ctx.on('subagent/progress', (info) => void heard.push({ kind: 'progress', info }))
    const ended = new Promise<SubagentRunEndInfo>((resolve) =>
      h.ctx.on('subagent/end', (info) => {
        heard.push({ kind: 'end', info })
        resolve(info)
      }),
    )
    const parent = await h.agent()
    const { childId } = await h.ctx.subagents.startContinuable({ provider: 'remote', label: 'far', request: { prompt: [text('go')], parent }, signal: new AbortController().signal })
    const end = await ended
    expect(provider.sinks[0]).toBeDefined()
    expect(end).toMatchObject({ id: childId, continuable: true, usage: USAGE })
    expect(heard.at(-1)!.kind).toBe('end')
    const updates = heard.flatMap((entry) => (entry.kind === 'progress' ? entry.info.updates : []))
    expect(updates.some((update) => update.kind === 'tool-start' && update.name === 'read_file')).toBe(true)
    // The parent-side record keeps the turn's usage on its answer, for `sessions show` and the tree.
    const stored = await h.ctx.sessions.readStored(childId)
    const answer = stored!.events.find((event) => event.type === 'assistant/message')
    expect(answer).toMatchObject({ usage: { inputTokens: 120, outputTokens: 30, cacheHitInputTokens: 100 } })
  })
})
