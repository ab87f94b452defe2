/**
 * A2A contexts are stored dsh sessions: a message naming a known context continues its
 * session, also on a new server over the same storage, and one naming an unknown context
 * opens it under that name; an unknown context a dsh parent says must exist, a busy one,
 * a session that is not an A2A context and another parent's context are refused with an
 * error the client receives, and nothing is made.
 */
import { mkdtempSync, rmSync } from 'node:fs'
import { tmpdir } from 'node:os'
import { join } from 'node:path'
import { randomUUID } from 'node:crypto'
import { afterEach, describe, expect, it } from 'vitest'
import { TaskState, type StreamResponse } from '@a2a-js/sdk'
import SessionJsonl from '@dsh/session-jsonl'
import type { Script } from '@dsh/llm-scripted'
import type { Session } from '@dsh/session'
import { serveA2a, type A2aServer } from '@dsh/a2a-server'
import { CONTEXTS_EXTENSION } from '../src/contexts.js'
import { createHarness, type Harness } from '@dsh/testkit/harness'
import { artifactText, finalState, sdkClient, streamAll, until, userMessage } from './helpers.js'

const cleanups: Array<() => Promise<void>> = []
afterEach(async () => {
  for (const cleanup of cleanups.splice(0).reverse()) await cleanup()
})

interface StoringWorker {
  harness: Harness
  server: A2aServer
  /** Every session the worker made live, in order (a continued context's again each time). */
  sessions: Session[]
  stop(): Promise<void>
}

/** A worker whose sessions are stored in `dir` (a fresh directory by default). */
async function storingWorker(script: Script, dir?: string): Promise<StoringWorker & { dir: string }> {
  const sessionDir = dir ?? mkdtempSync(join(tmpdir(), 'dsh-a2a-contexts-'))
  if (dir === undefined) cleanups.push(async () => rmSync(sessionDir, { recursive: true, force: true }))
  const harness = await createHarness({ script })
  await harness.plugin(SessionJsonl, { dir: sessionDir })
  const sessions: Session[] = []
  harness.ctx.sessions.addObserver({ created: (session) => void sessions.push(session) })
  const server = await serveA2a(harness.ctx)
  let stopped: Promise<void> | undefined
  const stop = () => (stopped ??= server.close().then(() => harness.dispose()))
  cleanups.push(stop)
  return { harness, server, sessions, stop, dir: sessionDir }
}

function taskOf(events: StreamResponse[]): { id: string; contextId: string } {
  const first = events[0]?.payload
  if (first?.$case !== 'task') throw new Error(`the first event is ${first?.$case}, not the task`)
  return { id: first.value.id, contextId: first.value.contextId }
}

function userTexts(session: Session): string[] {
  return session.events().flatMap((event) => (event.type === 'user/message' ? [event.message.content.map((block) => ('text' in block ? block.text : '')).join('')] : []))
}

describe('A2A contexts as dsh sessions', () => {
  it('a message naming a known context continues its session: one conversation, whose later turn sees the earlier ones', async () => {
    const w = await storingWorker([{ reply: [{ call: { tool: 'note', args: {} } }, { text: 'first answer' }, { text: 'second answer recalls {{last_tool_result}}' }] }])
    w.harness.ctx.tools.register({ name: 'note', description: 'returns a marker', parameters: { type: 'object' }, execute: async () => 'marker-of-turn-one' })
    const client = await sdkClient(w.server.url)
    const card = await client.getAgentCard()
    expect(card.capabilities?.extensions.map((extension) => extension.uri)).toContain(CONTEXTS_EXTENSION)

    const first = await streamAll(client, userMessage('hello'))
    expect(finalState(first)).toBe(TaskState.TASK_STATE_COMPLETED)
    const { contextId, id: firstTask } = taskOf(first)
    // The context is the session: its id names the session the task ran in.
    expect(w.sessions.map((session) => session.id)).toEqual([contextId])

    const second = await streamAll(client, { ...userMessage('and then?'), contextId })
    expect(finalState(second)).toBe(TaskState.TASK_STATE_COMPLETED)
    expect(taskOf(second).contextId).toBe(contextId)
    expect(taskOf(second).id).not.toBe(firstTask)
    expect(artifactText(second, 'answer')).toBe('second answer recalls marker-of-turn-one')
    expect(w.sessions.map((session) => session.id)).toEqual([contextId, contextId])
    expect(userTexts(w.sessions[1]!)).toEqual(['hello', 'and then?'])
  })

  it('a context outlives its worker: a new server over the same storage continues it', async () => {
    const script: Script = [{ reply: [{ text: 'one' }, { text: 'two' }] }]
    const before = await storingWorker(script)
    const first = await streamAll(await sdkClient(before.server.url), userMessage('hello'))
    const { contextId } = taskOf(first)
    await before.stop()

    const after = await storingWorker(script, before.dir)
    const second = await streamAll(await sdkClient(after.server.url), { ...userMessage('again'), contextId })
    expect(finalState(second)).toBe(TaskState.TASK_STATE_COMPLETED)
    expect(artifactText(second, 'answer')).toBe('two')
    expect(userTexts(after.sessions[0]!)).toEqual(['hello', 'again'])
  })

  it('an unknown context id opens a context under that name; one a dsh parent says must exist, the id of a session that is not an A2A context, or a name that cannot be one, is refused with an error and makes nothing', async () => {
    const w = await storingWorker([{ reply: [{ text: 'ok' }] }])
    const client = await sdkClient(w.server.url)
    const unknown = randomUUID()
    const mustExist = { dsh: { parentSession: 'parent-a', delegationDepth: 1, provider: 'a2a', existingContext: true } }
    await expect(streamAll(client, { ...userMessage('hi', mustExist), contextId: unknown })).rejects.toThrow(new RegExp(`this worker has no context ${unknown}`))
    await expect(client.sendMessage({ tenant: '', message: { ...userMessage('hi', mustExist), contextId: unknown }, configuration: undefined, metadata: undefined })).rejects.toThrow(/has no context/)
    // A session of this machine that no A2A task made is not a context.
    const other = await w.harness.agent()
    await other.dispose()
    await expect(streamAll(client, { ...userMessage('hi'), contextId: other.id })).rejects.toThrow(new RegExp(`context id ${other.id} is taken here by something that is not an A2A conversation`))
    // Nor is a name that cannot be a session.
    await expect(streamAll(client, { ...userMessage('hi'), contextId: '../etc/passwd' })).rejects.toThrow(/cannot name a context here/)
    await expect(streamAll(client, { ...userMessage('hi'), contextId: 'has spaces' })).rejects.toThrow(/cannot name a context here/)
    expect(w.sessions.map((session) => session.id)).toEqual([other.id])
    expect(w.server.taskCount).toBe(0)
    // Without the dsh parent's word, an unknown context is a new one under the client's name.
    const opened = await streamAll(client, { ...userMessage('hi'), contextId: unknown })
    expect(finalState(opened)).toBe(TaskState.TASK_STATE_COMPLETED)
    expect(taskOf(opened).contextId).toBe(unknown)
    expect(w.sessions.at(-1)!.header).toMatchObject({ id: unknown, origin: 'a2a' })
  })

  it('a context whose task still runs refuses the next message; the running task is untouched', async () => {
    const w = await storingWorker([{ reply: [{ text: 'slow', delay_ms: 60_000 }] }])
    const client = await sdkClient(w.server.url)
    let task: { id: string; contextId: string } | undefined
    const running = streamAll(client, userMessage('take your time'), (event) => {
      if (event.payload?.$case === 'task') task = { id: event.payload.value.id, contextId: event.payload.value.contextId }
    })
    await until(() => task !== undefined && w.sessions.length === 1)
    await expect(streamAll(client, { ...userMessage('me too'), contextId: task!.contextId })).rejects.toThrow(new RegExp(`context ${task!.contextId} has task ${task!.id} still running`))
    expect(w.server.taskCount).toBe(1)
    await client.cancelTask({ tenant: '', id: task!.id, metadata: undefined })
    expect(finalState(await running)).toBe(TaskState.TASK_STATE_CANCELED)
  })

  it('a dsh parent names its child\'s context, continues it saying it must exist, and another parent may not continue it', async () => {
    const w = await storingWorker([{ reply: [{ text: 'one' }, { text: 'two' }] }])
    const client = await sdkClient(w.server.url)
    const contextId = randomUUID()
    const lineage = { parentSession: 'parent-a', delegationDepth: 1, provider: 'a2a' }
    const opened = await streamAll(client, { ...userMessage('hello', { dsh: lineage }), contextId })
    expect(taskOf(opened).contextId).toBe(contextId)
    expect(w.sessions[0]!.header).toMatchObject({ id: contextId, origin: 'a2a', parentSession: 'parent-a' })
    const again = await streamAll(client, { ...userMessage('again', { dsh: { ...lineage, existingContext: true } }), contextId })
    expect(artifactText(again, 'answer')).toBe('two')
    await expect(streamAll(client, { ...userMessage('mine now', { dsh: { ...lineage, parentSession: 'parent-b' } }), contextId })).rejects.toThrow(/belongs to another delegating parent \(parent-a\), not parent-b/)
    expect(w.sessions.map((session) => session.id)).toEqual([contextId, contextId])
  })

  it('without session storage no context is announced or continued: each task is a new conversation, and one that must exist is refused', async () => {
    const harness = await createHarness({ script: [{ reply: [{ text: 'ok' }] }] })
    const server = await serveA2a(harness.ctx)
    cleanups.push(async () => {
      await server.close()
      await harness.dispose()
    })
    const client = await sdkClient(server.url)
    expect((await client.getAgentCard()).capabilities?.extensions.map((extension) => extension.uri)).not.toContain(CONTEXTS_EXTENSION)
    const first = await streamAll(client, userMessage('hi'))
    expect(finalState(first)).toBe(TaskState.TASK_STATE_COMPLETED)
    const { contextId } = taskOf(first)
    await expect(streamAll(client, { ...userMessage('again', { dsh: { existingContext: true } }), contextId })).rejects.toThrow(/stores no sessions, so it holds no context/)
    expect(finalState(await streamAll(client, { ...userMessage('again'), contextId }))).toBe(TaskState.TASK_STATE_COMPLETED)
  })
})
