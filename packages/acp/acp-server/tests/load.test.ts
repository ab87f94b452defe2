/**
 * `session/load` over a real harness with the real JSONL storage, driven by the SDK's
 * client app: sessions are written to a temporary directory by one connection and
 * reopened by another, as an editor does after a restart.
 */
import { mkdtempSync, readFileSync, realpathSync, writeFileSync } from 'node:fs'
import { tmpdir } from 'node:os'
import { join } from 'node:path'
import { afterEach, describe, expect, it } from 'vitest'
import { client, methods, PROTOCOL_VERSION, type ClientConnection, type SessionNotification, type Stream } from '@agentclientprotocol/sdk'
import { ApprovalService } from '@dsh/approvals'
import { createHarness, type Harness } from '@dsh/testkit/harness'
import SessionJsonl from '@dsh/session-jsonl'
import type { Script } from '@dsh/llm-scripted'
import { serveAcp, type AcpServer } from '@dsh/acp-server'
import { SubagentService } from '@dsh/subagent'

const harnesses: Harness[] = []
const connections: ClientConnection[] = []
afterEach(async () => {
  for (const connection of connections.splice(0)) connection.close()
  await Promise.all(harnesses.splice(0).map((harness) => harness.dispose()))
})

const tempDir = (prefix: string) => realpathSync(mkdtempSync(join(tmpdir(), prefix)))

/** A harness persisting to `dir`, as `dsh acp --session-dir dir` composes it. */
async function harnessOn(dir: string, script?: Script): Promise<Harness> {
  const harness = await createHarness({ script })
  await harness.plugin(SessionJsonl, { dir })
  await harness.plugin(ApprovalService)
  harness.ctx.tools.register({ name: 'lookup', description: 'looks up a key', parameters: { type: 'object' }, execute: (args) => `value of ${(args as { key: string }).key}` })
  harnesses.push(harness)
  return harness
}

interface Client {
  server: AcpServer
  agent: ClientConnection['agent']
  /** Every `session/update` received, in order. */
  updates: SessionNotification[]
  /** Close the connection as a client that goes away does; the server disposes its agents. */
  leave(): Promise<void>
}

async function connect(harness: Harness): Promise<Client> {
  const toServer = new TransformStream()
  const toClient = new TransformStream()
  const server = serveAcp(harness.ctx, { readable: toServer.readable, writable: toClient.writable } as Stream)
  const updates: SessionNotification[] = []
  const connection = client({ name: 'load-test' })
    .onNotification(methods.client.session.update, ({ params }) => void updates.push(params))
    .connect({ readable: toClient.readable, writable: toServer.writable } as Stream)
  connections.push(connection)
  await connection.agent.request(methods.agent.initialize, { protocolVersion: PROTOCOL_VERSION, clientCapabilities: {} })
  return {
    server,
    agent: connection.agent,
    updates,
    leave: async () => {
      connection.close()
      await toServer.writable.close().catch(() => {})
      await server.done
    },
  }
}

const prompt = (agent: Client['agent'], sessionId: string, text: string) => agent.request(methods.agent.session.prompt, { sessionId, prompt: [{ type: 'text', text }] })

/** A stored session of two turns (one with a tool call), written through a first connection that then goes away. */
async function storedConversation(dir: string, cwd: string) {
  const harness = await harnessOn(dir, [
    { reply: [{ text: 'Let me look.', call: { tool: 'lookup', args: { key: 'alpha' } } }, { text: 'Found it.' }, { text: 'Second answer.' }, { text: 'Still here; last result: {{last_tool_result}}' }] },
  ])
  const first = await connect(harness)
  const { sessionId } = await first.agent.request(methods.agent.session.new, { cwd, mcpServers: [] })
  expect(await prompt(first.agent, sessionId, 'look up alpha')).toMatchObject({ stopReason: 'end_turn' })
  expect(await prompt(first.agent, sessionId, 'and again')).toMatchObject({ stopReason: 'end_turn' })
  await first.leave()
  return { harness, sessionId, file: join(dir, `${sessionId}.jsonl`) }
}

const texts = (updates: SessionNotification[]) =>
  updates.map(({ update }) => {
    switch (update.sessionUpdate) {
      case 'user_message_chunk':
      case 'agent_message_chunk':
        return `${update.sessionUpdate === 'user_message_chunk' ? 'user' : 'agent'}: ${update.content.type === 'text' ? update.content.text : ''}`
      case 'tool_call':
        return `tool_call ${update.title} ${JSON.stringify(update.rawInput)}`
      case 'tool_call_update':
        return `tool_call_update ${update.status}`
      default:
        return update.sessionUpdate
    }
  })

/** The agent's text of live updates (streamed in several chunks). */
const agentText = (updates: SessionNotification[]) =>
  updates.map(({ update }) => (update.sessionUpdate === 'agent_message_chunk' && update.content.type === 'text' ? update.content.text : '')).join('')

describe('session/load', () => {
  it('initialize advertises loadSession only when sessions are stored', async () => {
    const stored = await connect(await harnessOn(tempDir('acp-load-dir-')))
    const withStorage = await connections.at(-1)!.agent.request(methods.agent.initialize, { protocolVersion: PROTOCOL_VERSION, clientCapabilities: {} })
    expect(withStorage.agentCapabilities?.loadSession).toBe(true)
    await stored.leave()
    const bare = await createHarness({})
    await bare.plugin(ApprovalService)
    harnesses.push(bare)
    await connect(bare)
    const withoutStorage = await connections.at(-1)!.agent.request(methods.agent.initialize, { protocolVersion: PROTOCOL_VERSION, clientCapabilities: {} })
    expect(withoutStorage.agentCapabilities?.loadSession).toBe(false)
  })

  it('replays the whole conversation before answering, then a prompt continues it with its history', async () => {
    const dir = tempDir('acp-load-dir-')
    const cwd = tempDir('acp-load-cwd-')
    const { harness, sessionId } = await storedConversation(dir, cwd)
    const second = await connect(harness)
    const answer = await second.agent.request(methods.agent.session.load, { sessionId, cwd, mcpServers: [] })
    expect(answer).toEqual({})
    // Everything replayed arrived before the answer: nothing more comes for the old turns.
    expect(second.updates.every((update) => update.sessionId === sessionId)).toBe(true)
    expect(texts(second.updates)).toEqual([
      'user: look up alpha',
      'agent: Let me look.',
      'tool_call lookup {"key":"alpha"}',
      'tool_call_update completed',
      'agent: Found it.',
      'user: and again',
      'agent: Second answer.',
    ])
    const replayed = second.updates.length
    expect(await prompt(second.agent, sessionId, 'do you remember?')).toMatchObject({ stopReason: 'end_turn' })
    // The tool result of the first turn is in the model's context of the third.
    expect(agentText(second.updates.slice(replayed))).toBe('Still here; last result: value of alpha')
    const live = harness.ctx.agents.get(sessionId)!
    expect(live.session.header.origin).toBe('acp')
    expect(live.session.events().filter((event) => event.type === 'turn/start')).toHaveLength(3)
  })

  it('an unknown session id is resource-not-found and creates nothing', async () => {
    const dir = tempDir('acp-load-dir-')
    const harness = await harnessOn(dir)
    const { agent } = await connect(harness)
    const error = await agent.request(methods.agent.session.load, { sessionId: 'no-such-session', cwd: tempDir('acp-load-cwd-'), mcpServers: [] }).catch((rejection: unknown) => rejection)
    expect(error).toMatchObject({ code: -32002, message: expect.stringContaining('no stored dsh session no-such-session') })
    expect(harness.ctx.agents.list()).toEqual([])
    await expect(agent.request(methods.agent.session.load, { sessionId: '../etc/passwd', cwd: tempDir('acp-load-cwd-'), mcpServers: [] })).rejects.toMatchObject({ code: -32602 })
  })

  it('a corrupt session file is a clear internal error naming the file, and stays as it was', async () => {
    const dir = tempDir('acp-load-dir-')
    const file = join(dir, 'broken-session.jsonl')
    writeFileSync(file, 'this is not a session\n')
    const harness = await harnessOn(dir)
    const { agent } = await connect(harness)
    const error = await agent.request(methods.agent.session.load, { sessionId: 'broken-session', cwd: tempDir('acp-load-cwd-'), mcpServers: [] }).catch((rejection: unknown) => rejection)
    expect(error).toMatchObject({ code: -32603, message: expect.stringContaining(`cannot load session broken-session: ${file}:1:`) })
    expect(readFileSync(file, 'utf8')).toBe('this is not a session\n')
    expect(harness.ctx.agents.list()).toEqual([])
  })

  it('a session live in another process is refused with the store\'s in-use error, and its file is untouched', async () => {
    const dir = tempDir('acp-load-dir-')
    const cwd = tempDir('acp-load-cwd-')
    const { sessionId, file } = await storedConversation(dir, cwd)
    // Another storage on the same directory holds the session live: to the lock it is another process.
    const holder = await harnessOn(dir)
    const held = await holder.ctx.agents.create({ sessionId })
    const before = readFileSync(file, 'utf8')
    const other = await harnessOn(dir)
    const { agent } = await connect(other)
    const error = await agent.request(methods.agent.session.load, { sessionId, cwd, mcpServers: [] }).catch((rejection: unknown) => rejection)
    expect(error).toMatchObject({ code: -32600, message: expect.stringContaining(`session ${sessionId} is in use by`), data: expect.objectContaining({ code: 'IN_USE' }) })
    expect(other.ctx.agents.list()).toEqual([])
    expect(readFileSync(file, 'utf8')).toBe(before)
    expect(held.status).toBe('idle')
  })

  it('a load with another cwd, or by a parent that is not the session\'s, is refused before anything opens', async () => {
    const dir = tempDir('acp-load-dir-')
    const cwd = tempDir('acp-load-cwd-')
    const harness = await harnessOn(dir, [{ reply: [{ text: 'child answer' }] }])
    const first = await connect(harness)
    const { sessionId } = await first.agent.request(methods.agent.session.new, { cwd, mcpServers: [], _meta: { dsh: { parentSession: 'parent-a', delegationDepth: 1, provider: 'acp' } } })
    await prompt(first.agent, sessionId, 'work')
    await first.leave()
    const file = join(dir, `${sessionId}.jsonl`)
    const before = readFileSync(file, 'utf8')
    const { agent } = await connect(harness)
    await expect(agent.request(methods.agent.session.load, { sessionId, cwd: tempDir('acp-load-cwd-'), mcpServers: [] })).rejects.toMatchObject({
      code: -32602,
      message: expect.stringContaining(`load it with cwd ${cwd}`),
    })
    await expect(agent.request(methods.agent.session.load, { sessionId, cwd, mcpServers: [], _meta: { dsh: { parentSession: 'parent-b' } } })).rejects.toMatchObject({
      code: -32602,
      message: expect.stringContaining('is not a child of parent-b (its parent is parent-a)'),
    })
    expect(harness.ctx.agents.list()).toEqual([])
    expect(readFileSync(file, 'utf8')).toBe(before)
    // Its own parent may reopen it.
    await agent.request(methods.agent.session.load, { sessionId, cwd, mcpServers: [], _meta: { dsh: { parentSession: 'parent-a' } } })
    expect(harness.ctx.agents.get(sessionId)?.session.header.parentSession).toBe('parent-a')
  })

  it('a reopened session is still bounded by the budget its parent handed it: its run stops for the budget', async () => {
    const dir = tempDir('acp-load-dir-')
    const cwd = tempDir('acp-load-cwd-')
    const lineage = { parentSession: 'parent-a', delegationDepth: 1, provider: 'acp', budget: { outputTokens: 10 } }
    const first = await connect(await harnessOn(dir, [{ when: { prompt: 'hello' }, reply: [{ text: 'hi' }] }]))
    const { sessionId } = await first.agent.request(methods.agent.session.new, { cwd, mcpServers: [], _meta: { dsh: lineage } })
    await prompt(first.agent, sessionId, 'hello')
    await first.leave()
    // Another process (a fresh harness on the same store) reopens it; its next call spends past the budget.
    // The script binds a session by its first prompt and goes on after the replies it already has.
    const spend: Script = [{ when: { prompt: 'hello' }, reply: [{ text: 'hi' }, { text: 'a long answer that spends far more than ten output tokens of the budget', call: { tool: 'lookup', args: { key: 'k' } } }, { text: 'past the budget' }] }]
    const harness = await harnessOn(dir, spend)
    await harness.plugin(SubagentService)
    const { agent } = await connect(harness)
    await agent.request(methods.agent.session.load, { sessionId, cwd, mcpServers: [], _meta: { dsh: { parentSession: 'parent-a' } } })
    const answer = await prompt(agent, sessionId, 'spend')
    expect(answer._meta).toMatchObject({ dsh: { stopReason: 'budget' } })
  })

  it('a second load of a session already open on the connection is refused', async () => {
    const dir = tempDir('acp-load-dir-')
    const cwd = tempDir('acp-load-cwd-')
    const { harness, sessionId } = await storedConversation(dir, cwd)
    const { agent } = await connect(harness)
    const first = agent.request(methods.agent.session.load, { sessionId, cwd, mcpServers: [] })
    const second = agent.request(methods.agent.session.load, { sessionId, cwd, mcpServers: [] })
    await expect(first).resolves.toEqual({})
    await expect(second).rejects.toMatchObject({ code: -32600, message: expect.stringContaining('already open on this connection') })
    expect(harness.ctx.agents.list().map((live) => live.id)).toEqual([sessionId])
  })

  it('the end of the input disposes a loaded session, releasing it for the next load', async () => {
    const dir = tempDir('acp-load-dir-')
    const cwd = tempDir('acp-load-cwd-')
    const { harness, sessionId } = await storedConversation(dir, cwd)
    const second = await connect(harness)
    await second.agent.request(methods.agent.session.load, { sessionId, cwd, mcpServers: [] })
    await second.leave()
    expect(harness.ctx.agents.list()).toEqual([])
    const third = await connect(harness)
    await expect(third.agent.request(methods.agent.session.load, { sessionId, cwd, mcpServers: [] })).resolves.toEqual({})
  })
})
