/**
 * The `a2a` provider as a continuable child: a context on a dsh worker (in this process,
 * its sessions stored), one task per turn. The conversations are driven as the
 * continuation manager drives them; the whole path through `dsh run` and a `dsh a2a
 * serve` process is the CLI's test (`a2a-continuable.test.ts`).
 */
import { mkdtempSync, rmSync } from 'node:fs'
import { tmpdir } from 'node:os'
import { join } from 'node:path'
import { afterEach, describe, expect, it } from 'vitest'
import { TaskState } from '@a2a-js/sdk'
import { AgentEvent, type AgentExecutor } from '@a2a-js/sdk/server'
import SessionJsonl from '@dsh/session-jsonl'
import { text } from '@dsh/llm'
import type { Script } from '@dsh/llm-scripted'
import type { Session } from '@dsh/session'
import { serveA2a } from '@dsh/a2a-server'
import { createHarness } from '@dsh/testkit/harness'
import { DESCRIPTOR_VERSION, outputText, type ContinuableDescriptor, type PrepareContinuableRequest, type RemoteChildRecord, type RemoteConversation } from '@dsh/subagent'
import { A2aProvider, CONTEXTS_EXTENSION } from '@dsh/subagent-a2a'
import { dshWorker, parentWith, sdkAgent, type Parent } from './helpers.js'

const cleanups: Array<() => Promise<void>> = []
afterEach(async () => {
  for (const cleanup of cleanups.splice(0).reverse()) await cleanup()
})

/** A dsh worker whose sessions are stored, so its contexts can be continued. */
async function storingWorker(script: Script): Promise<{ url: string; sessions: Session[] }> {
  const dir = mkdtempSync(join(tmpdir(), 'dsh-a2a-continuable-'))
  const harness = await createHarness({ script })
  await harness.plugin(SessionJsonl, { dir })
  const sessions: Session[] = []
  harness.ctx.sessions.addObserver({ created: (session) => void sessions.push(session) })
  const server = await serveA2a(harness.ctx)
  cleanups.push(async () => {
    await server.close()
    await harness.dispose()
    rmSync(dir, { recursive: true, force: true })
  })
  return { url: server.url, sessions }
}

async function parent(urls: string[]): Promise<Parent> {
  const started = await parentWith({ urls })
  cleanups.push(() => started.harness.dispose())
  return started
}

function providerOf(p: Parent): A2aProvider {
  return p.harness.ctx.subagents.getProvider('a2a') as A2aProvider
}

function prepareRequest(p: Parent, signal = new AbortController().signal): PrepareContinuableRequest {
  const descriptor: ContinuableDescriptor = { version: DESCRIPTOR_VERSION, mode: 'continuable', provider: 'a2a', label: 'researcher' }
  return { childId: 'child-1', parent: p.parent, descriptor, request: { prompt: [text('unused: the manager sends the first prompt')], parent: p.parent }, signal }
}

async function open(p: Parent): Promise<RemoteConversation> {
  const preparation = await providerOf(p).prepareContinuable(prepareRequest(p))
  if (preparation.kind !== 'remote') throw new Error('an A2A child is remote')
  cleanups.push(() => preparation.conversation.dispose())
  return preparation.conversation
}

function userTexts(session: Session): string[] {
  return session.events().flatMap((event) => (event.type === 'user/message' ? [event.message.content.map((block) => ('text' in block ? block.text : '')).join('')] : []))
}

describe('a2a provider: continuable children', () => {
  it('a continuable child is one context on one worker: each message a task of it, and a resumed record continues it', async () => {
    const w = await storingWorker([{ reply: [{ text: 'one' }, { text: 'two' }, { text: 'three' }] }])
    const p = await parent([w.url])
    const conversation = await open(p)
    expect(conversation.resumeData).toEqual({ worker: w.url })
    const first = await conversation.send([text('hello')])
    expect(first).toMatchObject({ stopReason: 'completed' })
    expect(outputText(first.output)).toBe('one')
    expect(outputText((await conversation.send([text('and then?')])).output)).toBe('two')
    // The context is the worker's session, named by the client before its first message.
    expect(w.sessions.map((session) => session.id)).toEqual([conversation.remoteId, conversation.remoteId])
    expect(w.sessions[0]!.header).toMatchObject({ origin: 'a2a', parentSession: p.parent.id, delegationDepth: 1, provider: 'a2a', label: 'researcher' })
    await conversation.dispose()

    // Another process of the parent reopens the record: the next message continues the context.
    const record: RemoteChildRecord = { childId: 'child-1', parentId: p.parent.id, depth: 1, remoteId: conversation.remoteId, descriptor: prepareRequest(p).descriptor, resumeData: { worker: w.url } }
    const resumed = await providerOf(p).resumeContinuable(record, new AbortController().signal)
    cleanups.push(() => resumed.dispose())
    expect(outputText((await resumed.send([text('one more')])).output)).toBe('three')
    expect(userTexts(w.sessions.at(-1)!)).toEqual(['hello', 'and then?', 'one more'])
  })

  it('a record whose context the worker no longer holds ends its turn error, naming the context', async () => {
    const w = await storingWorker([{ reply: [{ text: 'never' }] }])
    const p = await parent([w.url])
    const record: RemoteChildRecord = { childId: 'child-1', parentId: p.parent.id, depth: 1, remoteId: 'a-context-it-never-had', descriptor: prepareRequest(p).descriptor, resumeData: { worker: w.url } }
    const resumed = await providerOf(p).resumeContinuable(record, new AbortController().signal)
    cleanups.push(() => resumed.dispose())
    const result = await resumed.send([text('are you there?')])
    expect(result.stopReason).toBe('error')
    expect(result.diagnostic).toMatch(/this worker has no context a-context-it-never-had/)
    expect(w.sessions).toEqual([])
  })

  it('a record naming a worker that is not in urls is refused: the child stays where it was, and no token goes elsewhere', async () => {
    const w = await storingWorker([{ reply: [{ text: 'never' }] }])
    const p = await parent([w.url])
    const record: RemoteChildRecord = { childId: 'child-1', parentId: p.parent.id, depth: 1, remoteId: 'ctx', descriptor: prepareRequest(p).descriptor, resumeData: { worker: 'http://127.0.0.1:9' } }
    await expect(providerOf(p).resumeContinuable(record, new AbortController().signal)).rejects.toThrow(/lives in a context on the worker http:\/\/127\.0\.0\.1:9, which is not in the "a2a" provider's urls/)
    await expect(providerOf(p).resumeContinuable({ ...record, resumeData: {} }, new AbortController().signal)).rejects.toThrow(/names no worker in its resumeData/)
  })

  it('workers that cannot keep a context (no session storage, or not dsh) refuse a continuable child at its start', async () => {
    const plain = await dshWorker([{ reply: [{ text: 'x' }] }])
    cleanups.push(() => plain.dispose())
    const p = await parent([plain.server.url])
    await expect(providerOf(p).prepareContinuable(prepareRequest(p))).rejects.toMatchObject({ code: 'UNSUPPORTED_CAPABILITY', message: expect.stringContaining(CONTEXTS_EXTENSION) })
    expect(plain.sessions).toEqual([])
  })

  it('a worker that puts the task in another context fails the turn: it does not keep the child\'s conversation', async () => {
    // An agent whose card claims the extension but starts every task in a context of its own.
    const executor: AgentExecutor = {
      execute: async (request, bus) => {
        const contextId = 'a-context-of-its-own'
        bus.publish(AgentEvent.task({ id: request.taskId, contextId, status: { state: TaskState.TASK_STATE_COMPLETED, message: undefined, timestamp: new Date().toISOString() }, artifacts: [], history: [], metadata: undefined }))
        bus.finished()
      },
      cancelTask: async () => {},
    }
    const agent = await sdkAgent(executor, { extensions: [{ uri: CONTEXTS_EXTENSION, description: '', required: false, params: undefined }] })
    cleanups.push(() => agent.close())
    const p = await parent([agent.url])
    const conversation = await open(p)
    const result = await conversation.send([text('hello')])
    expect(result.stopReason).toBe('error')
    expect(result.diagnostic).toMatch(new RegExp(`in context "a-context-of-its-own", not in context ${conversation.remoteId} of this child`))
  })
})
