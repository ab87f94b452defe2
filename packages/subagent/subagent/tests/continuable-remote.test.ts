import { mkdtemp } from 'node:fs/promises'
import { tmpdir } from 'node:os'
import { join } from 'node:path'
import { afterEach, describe, expect, it } from 'vitest'
import type { Harness } from '@dsh/testkit/harness'
import { createDelegationHarness, turnEnds, cleanUp } from '@dsh/testkit/delegation'
import { text, textOf, type TextBlock } from '@dsh/llm'
import type { Agent } from '@dsh/agent'
import { NO_CAPABILITIES, type PrepareContinuableRequest, type RemoteChildRecord, type RemoteConversation, type SubagentProvider, type SubagentResult } from '@dsh/subagent'

/**
 * A package-local remote provider: each conversation is a transcript kept outside the
 * harness (as a remote agent keeps its session across our restarts); the child answers
 * with everything it has been told so far, so an answer shows the whole history.
 */
class TranscriptProvider implements SubagentProvider {
  readonly name = 'remote'
  readonly capabilities = NO_CAPABILITIES
  readonly inheritsParentContext = false
  readonly transcripts = new Map<string, string[]>()
  readonly open = new Set<string>()
  resumed: RemoteChildRecord[] = []
  prepared: string[] = []
  private counter = 0
  private heldStarted = () => {}
  /** Resolves once a held turn has started. */
  readonly holding = new Promise<void>((resolve) => (this.heldStarted = resolve))

  start(): never {
    throw new Error('one-shot runs are not used here')
  }

  async prepareContinuable({ childId }: PrepareContinuableRequest): Promise<{ kind: 'remote'; conversation: RemoteConversation }> {
    this.prepared.push(childId)
    const remoteId = `conv-${++this.counter}`
    this.transcripts.set(remoteId, [])
    return { kind: 'remote', conversation: this.conversation(remoteId) }
  }

  async resumeContinuable(record: RemoteChildRecord): Promise<RemoteConversation> {
    if (!this.transcripts.has(record.remoteId)) throw new Error(`no conversation ${record.remoteId}`)
    this.resumed.push(record)
    return this.conversation(record.remoteId)
  }

  private conversation(remoteId: string): RemoteConversation {
    this.open.add(remoteId)
    const transcript = this.transcripts.get(remoteId)!
    let cancelHeld = () => {}
    return {
      remoteId,
      resumeData: { note: 'kept verbatim' },
      send: async (message: TextBlock[]): Promise<SubagentResult> => {
        transcript.push(textOf(message))
        // A message starting "hold" keeps its turn running until it is cancelled.
        if (textOf(message).startsWith('hold')) {
          this.heldStarted()
          await new Promise<void>((resolve) => (cancelHeld = resolve))
          return { output: [], stopReason: 'aborted', diagnostic: 'cancelled' }
        }
        return { output: [text(`heard so far: ${transcript.join(' | ')}`)], stopReason: 'completed' }
      },
      cancel: () => cancelHeld(),
      dispose: async () => {
        this.open.delete(remoteId)
      },
    }
  }
}

const SCRIPT = [{ reply: Array.from({ length: 8 }, (_, index) => ({ text: `parent ack ${index + 1}` })) }]

let harness: Harness | undefined
let dir: string | undefined
afterEach(async () => {
  await cleanUp(harness, dir)
  harness = dir = undefined
})

async function start(provider: TranscriptProvider, sessionDir: string): Promise<Harness> {
  const h = (harness = await createDelegationHarness({ script: SCRIPT, sessionDir }))
  h.ctx.subagents.registerProvider(provider)
  return h
}


const noticeTexts = (agent: Agent) => agent.session.ownEvents().flatMap((event) => (event.type === 'user/message' ? [textOf(event.message.content)] : []))

describe('continuable remote children', () => {
  it('a remote child is driven turn by turn, recorded on the parent side, and reopened through its provider after a restart', async () => {
    dir = await mkdtemp(join(tmpdir(), 'dsh-remote-continuable-'))
    const provider = new TranscriptProvider()
    const first = await start(provider, dir)
    const parent = await first.agent()
    const { childId } = await first.ctx.subagents.startContinuable({ provider: 'remote', label: 'remote helper', request: { prompt: [text('hello')], parent }, signal: new AbortController().signal })
    expect(provider.prepared).toEqual([childId])
    await turnEnds(parent, 1)
    expect(noticeTexts(parent)[0]).toContain(`Subagent ${childId} finished its turn`)
    expect(noticeTexts(parent)[0]).toContain('heard so far: hello')
    const record = await first.ctx.sessions.readStored(childId)
    expect(record?.header).toMatchObject({ parentSession: parent.id, delegationDepth: 1, provider: 'remote', descriptor: { version: 1, mode: 'continuable', provider: 'remote', label: 'remote helper', remote: { remoteId: 'conv-1', resumeData: { note: 'kept verbatim' } } } })
    expect((await first.ctx.subagents.listChildren(parent.id)).map((child) => ({ ...child }))).toEqual([{ childId, parentId: parent.id, depth: 1, provider: 'remote', label: 'remote helper', state: 'idle', turns: 1, local: false }])

    // The parent going away closes the conversation: nothing of the child stays open.
    const parentId = parent.id
    await first.dispose()
    expect(provider.open.size).toBe(0)

    const second = await start(provider, dir)
    const resumed = await second.ctx.agents.create({ sessionId: parentId })
    await second.ctx.subagents.followup(resumed, childId, 'are you there?')
    expect(provider.resumed).toEqual([{ childId, parentId, depth: 1, remoteId: 'conv-1', descriptor: expect.objectContaining({ label: 'remote helper' }), resumeData: { note: 'kept verbatim' } }])
    await turnEnds(resumed, 2)
    expect(noticeTexts(resumed).at(-1)).toContain('heard so far: hello | are you there?')
    const [listed] = await second.ctx.subagents.listChildren(parentId)
    expect(listed).toMatchObject({ childId, turns: 2, local: false })
  })

  it('stopping the parent\'s work drops the remote child\'s queued messages and ends its turn aborted without a notice; it stays reachable', async () => {
    dir = await mkdtemp(join(tmpdir(), 'dsh-remote-continuable-'))
    const provider = new TranscriptProvider()
    const h = await start(provider, dir)
    const parent = await h.agent()
    const { childId } = await h.ctx.subagents.startContinuable({ provider: 'remote', label: 'held', request: { prompt: [text('hold this')], parent }, signal: new AbortController().signal })
    await h.ctx.subagents.followup(parent, childId, 'queued one')
    await h.ctx.subagents.followup(parent, childId, 'queued two')
    await provider.holding
    await h.ctx.subagents.continuation.killAll(parent.id, 'cancelled: by the test')
    expect(h.ctx.subagents.continuation.hasLive(parent.id)).toBe(false)
    expect(provider.transcripts.get('conv-1')).toEqual(['hold this'])
    const record = h.ctx.sessions.get(childId)!
    expect(record.ownEvents().filter((event) => event.type === 'turn/end')).toEqual([expect.objectContaining({ reason: 'aborted' })])
    await parent.whenIdle()
    expect(parent.session.ownEvents()).toEqual([])

    await h.ctx.subagents.followup(parent, childId, 'after the cancel')
    await turnEnds(parent, 1)
    expect(provider.transcripts.get('conv-1')).toEqual(['hold this', 'after the cancel'])
    expect(noticeTexts(parent)[0]).toContain('heard so far: hold this | after the cancel')
  })

  it('a child whose provider is gone is not resumable, naming the child and the provider', async () => {
    dir = await mkdtemp(join(tmpdir(), 'dsh-remote-continuable-'))
    const provider = new TranscriptProvider()
    const first = await start(provider, dir)
    const parent = await first.agent()
    const { childId } = await first.ctx.subagents.startContinuable({ provider: 'remote', label: 'x', request: { prompt: [text('hi')], parent }, signal: new AbortController().signal })
    await turnEnds(parent, 1)
    const parentId = parent.id
    await first.dispose()

    // Restarted without the provider.
    const h = (harness = await createDelegationHarness({ script: SCRIPT, sessionDir: dir }))
    const resumed = await h.ctx.agents.create({ sessionId: parentId })
    await expect(h.ctx.subagents.followup(resumed, childId, 'hello?')).rejects.toMatchObject({ code: 'NOT_RESUMABLE', message: expect.stringMatching(new RegExp(`subagent ${childId} .*provider "remote" is not registered`)) })
  })
})
