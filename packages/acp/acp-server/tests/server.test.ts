import { mkdtempSync, readFileSync, realpathSync } from 'node:fs'
import { tmpdir } from 'node:os'
import { join } from 'node:path'
import { afterEach, describe, expect, it } from 'vitest'
import { client, methods, PROTOCOL_VERSION, RequestError, type ClientConnection, type SessionUpdate, type Stream } from '@agentclientprotocol/sdk'
import { ApprovalService } from '@dsh/approvals'
import { createHarness, type Harness, type HarnessOptions } from '@dsh/testkit/harness'
import { serveAcp, type AcpServer } from '@dsh/acp-server'

let harness: Harness | undefined
let connection: ClientConnection | undefined
afterEach(async () => {
  connection?.close()
  await harness?.dispose()
  harness = undefined
  connection = undefined
})

/** A real harness served over an in-memory stream pair to a real SDK client app. */
async function serve(script?: HarnessOptions['script']): Promise<{ server: AcpServer; agent: ClientConnection['agent']; endInput(): Promise<void> }> {
  harness = await createHarness({ script })
  await harness.plugin(ApprovalService)
  const toServer = new TransformStream()
  const toClient = new TransformStream()
  // Commands run without asking here: permissions have their own tests.
  const server = serveAcp(harness.ctx, { readable: toServer.readable, writable: toClient.writable } as Stream, { permission: 'allow' })
  connection = client({ name: 'test-client' }).connect({ readable: toClient.readable, writable: toServer.writable } as Stream)
  await connection.agent.request(methods.agent.initialize, { protocolVersion: PROTOCOL_VERSION, clientCapabilities: {} })
  return {
    server,
    agent: connection.agent,
    // What a client closing our stdin looks like: the server's input ends.
    endInput: async () => {
      connection!.close()
      await toServer.writable.close()
    },
  }
}

function tempCwd(): string {
  return realpathSync(mkdtempSync(join(tmpdir(), 'acp-server-')))
}

/** Every update of one prompt turn, and its stop. */
async function turn(session: Awaited<ReturnType<ReturnType<ClientConnection['agent']['buildSession']>['start']>>, prompt: string) {
  void session.prompt(prompt).catch(() => {})
  const updates: SessionUpdate[] = []
  for (;;) {
    const message = await session.nextUpdate()
    if (message.kind === 'stop') return { updates, stopReason: message.stopReason }
    updates.push(message.update)
  }
}

const textOf = (updates: SessionUpdate[], kind = 'agent_message_chunk') =>
  updates.map((update) => (update.sessionUpdate === kind && update.content.type === 'text' ? update.content.text : '')).join('')

describe('acp-server', () => {
  it('initialize advertises ACP v1 with text and embedded context only, and no session/load without a session storage', async () => {
    harness = await createHarness({})
    await harness.plugin(ApprovalService)
    const toServer = new TransformStream()
    const toClient = new TransformStream()
    serveAcp(harness.ctx, { readable: toServer.readable, writable: toClient.writable } as Stream)
    connection = client().connect({ readable: toClient.readable, writable: toServer.writable } as Stream)
    const init = await connection.agent.request(methods.agent.initialize, { protocolVersion: PROTOCOL_VERSION, clientCapabilities: {} })
    expect(init).toMatchObject({
      protocolVersion: 1,
      agentCapabilities: { loadSession: false, promptCapabilities: { image: false, audio: false, embeddedContext: true } },
      agentInfo: { name: 'dsh' },
      authMethods: [],
    })
  })

  it("agentInfo names this package's version, or the one its host passes (dsh acp: the CLI's)", async () => {
    harness = await createHarness({})
    await harness.plugin(ApprovalService)
    const { version } = JSON.parse(readFileSync(new URL('../package.json', import.meta.url), 'utf8')) as { version: string }
    const initialize = async (options: { agentVersion?: string }) => {
      const toServer = new TransformStream()
      const toClient = new TransformStream()
      serveAcp(harness!.ctx, { readable: toServer.readable, writable: toClient.writable } as Stream, options)
      const opened = client().connect({ readable: toClient.readable, writable: toServer.writable } as Stream)
      try {
        return await opened.agent.request(methods.agent.initialize, { protocolVersion: PROTOCOL_VERSION, clientCapabilities: {} })
      } finally {
        opened.close()
      }
    }
    expect((await initialize({})).agentInfo).toEqual({ name: 'dsh', title: 'dsh', version })
    expect((await initialize({ agentVersion: '9.8.7-host' })).agentInfo).toEqual({ name: 'dsh', title: 'dsh', version: '9.8.7-host' })
  })

  it('turns started by completion notices belong to the prompt: streamed, and answered after them', async () => {
    const { agent } = await serve([{ reply: [
      { call: { tool: 'bash', args: { command: 'sleep 0.2; echo background done', run_in_background: true } } },
      { text: 'started it' },
      { text: 'the notice said: {{last_tool_result}}' },
    ] }])
    const { TaskService } = await import('@dsh/tasks')
    const { TaskToolsPlugin } = await import('@dsh/tool-tasks')
    const { BashService } = await import('@dsh/bash')
    const { BashToolPlugin } = await import('@dsh/tool-bash')
    await harness!.plugin(TaskService)
    await harness!.plugin(TaskToolsPlugin)
    await harness!.plugin(BashService)
    await harness!.plugin(BashToolPlugin)
    const session = await agent.buildSession(tempCwd()).start()
    const { updates, stopReason } = await turn(session, 'go')
    expect(stopReason).toBe('end_turn')
    expect(textOf(updates)).toContain('started it')
    expect(textOf(updates)).toContain('the notice said:')
    expect(harness!.ctx.agents.get(session.sessionId)!.status).toBe('idle')
  })

  it('session/new records a dsh parent\'s lineage from _meta.dsh, so depth continues across processes', async () => {
    const { agent } = await serve([{ reply: [{ text: 'x' }] }])
    const cwd = tempCwd()
    const linked = await agent.buildSession({ cwd, mcpServers: [], _meta: { dsh: { parentSession: 'parent-1', delegationDepth: 2, provider: 'acp', label: 'a task' } } }).start()
    expect(harness!.ctx.agents.get(linked.sessionId)!.session.header).toMatchObject({ origin: 'acp', parentSession: 'parent-1', delegationDepth: 2, provider: 'acp', label: 'a task' })
    expect(harness!.ctx.agents.get(linked.sessionId)!.depth).toBe(2)
    const malformed = await agent.buildSession({ cwd, mcpServers: [], _meta: { dsh: { parentSession: '../../etc', delegationDepth: -1 } } }).start()
    const header = harness!.ctx.agents.get(malformed.sessionId)!.session.header
    expect(header.parentSession).toBeUndefined()
    expect(header.delegationDepth).toBeUndefined()
  })

  it('session/new creates one dsh agent per ACP session, with origin acp and the client\'s cwd', async () => {
    const { agent } = await serve([{ reply: [{ text: 'x' }] }])
    const cwd = tempCwd()
    const first = await agent.buildSession(cwd).start()
    const second = await agent.buildSession(cwd).start()
    expect(first.sessionId).not.toBe(second.sessionId)
    const live = harness!.ctx.agents.get(first.sessionId)!
    expect(live.session.header).toMatchObject({ origin: 'acp', cwd })
    expect(harness!.ctx.agents.list().map((each) => each.id).sort()).toEqual([first.sessionId, second.sessionId].sort())
  })

  it('session/new refuses a relative or missing cwd', async () => {
    const { agent } = await serve()
    await expect(agent.buildSession('relative/dir').start()).rejects.toMatchObject({ code: -32602, message: expect.stringContaining('absolute') })
    await expect(agent.buildSession('/nonexistent/dsh').start()).rejects.toMatchObject({ code: -32602, message: expect.stringContaining('not a directory') })
    expect(harness!.ctx.agents.list()).toEqual([])
  })

  it('a prompt is one followup turn: text streams as message chunks, tool calls as tool_call and tool_call_update, then end_turn', async () => {
    const { agent } = await serve([
      { reply: [{ text: 'Let me look.', call: { tool: 'lookup', args: { key: 'a' } } }, { call: { tool: 'lookup', args: { key: 'missing' } } }, { text: 'Found: {{last_tool_result}}' }] },
    ])
    harness!.ctx.tools.register({
      name: 'lookup',
      description: 'looks up a key',
      parameters: { type: 'object', properties: { key: { type: 'string' } } },
      execute: (args) => {
        const { key } = args as { key: string }
        if (key === 'missing') throw new Error('no such key')
        return `value of ${key}`
      },
    })
    const session = await agent.buildSession(tempCwd()).start()
    const { updates, stopReason } = await turn(session, 'look it up')
    expect(stopReason).toBe('end_turn')
    expect(textOf(updates)).toBe('Let me look.Found: lookup failed: no such key')
    const tools = updates.filter((update) => update.sessionUpdate === 'tool_call' || update.sessionUpdate === 'tool_call_update')
    expect(tools).toEqual([
      expect.objectContaining({ sessionUpdate: 'tool_call', title: 'lookup', status: 'in_progress', rawInput: { key: 'a' } }),
      expect.objectContaining({ sessionUpdate: 'tool_call_update', status: 'completed', content: [{ type: 'content', content: { type: 'text', text: 'value of a' } }] }),
      expect.objectContaining({ sessionUpdate: 'tool_call', rawInput: { key: 'missing' } }),
      expect.objectContaining({ sessionUpdate: 'tool_call_update', status: 'failed' }),
    ])
    expect((tools[0] as { toolCallId: string }).toolCallId).toBe((tools[1] as { toolCallId: string }).toolCallId)
    const events = harness!.ctx.agents.get(session.sessionId)!.session.events().map((event) => event.type)
    expect(events.at(0)).toBe('turn/start')
    expect(events.at(-1)).toBe('turn/end')
  })

  it('session/cancel cancels the running turn and the prompt answers cancelled', async () => {
    const { agent } = await serve([{ reply: [{ text: 'slow', delay_ms: 60_000 }] }])
    const session = await agent.buildSession(tempCwd()).start()
    const answer = session.prompt('wait')
    await new Promise((resolve) => setTimeout(resolve, 100))
    await agent.notify(methods.agent.session.cancel, { sessionId: session.sessionId })
    expect(await answer).toMatchObject({ stopReason: 'cancelled' })
    expect(harness!.ctx.agents.get(session.sessionId)!.session.events().at(-1)).toMatchObject({ type: 'turn/end', reason: 'aborted' })
  })

  it('a cancel that arrives with the prompt, before the turn starts, still cancels it', async () => {
    const { agent } = await serve([{ reply: [{ text: 'slow', delay_ms: 60_000 }] }])
    const session = await agent.buildSession(tempCwd()).start()
    const answer = session.prompt('wait')
    void agent.notify(methods.agent.session.cancel, { sessionId: session.sessionId })
    expect(await answer).toMatchObject({ stopReason: 'cancelled' })
  })

  it('a failed turn answers the prompt with a JSON-RPC error carrying the turn\'s error', async () => {
    const { agent } = await serve([{ reply: [{ error: 'quota exceeded' }] }])
    const session = await agent.buildSession(tempCwd()).start()
    const error = await session.prompt('x').catch((rejection: unknown) => rejection)
    expect(error).toBeInstanceOf(RequestError)
    expect((error as RequestError).message).toBe('the turn ended with an error: quota exceeded')
  })

  it('refuses a second prompt while one runs, unsupported content, and unknown sessions', async () => {
    const { agent } = await serve([{ reply: [{ text: 'slow', delay_ms: 60_000 }] }])
    const session = await agent.buildSession(tempCwd()).start()
    const first = session.prompt('wait')
    await new Promise((resolve) => setTimeout(resolve, 50))
    await expect(session.prompt('again')).rejects.toMatchObject({ message: expect.stringContaining('already running') })
    await agent.notify(methods.agent.session.cancel, { sessionId: session.sessionId })
    await first
    await expect(session.prompt({ type: 'image', data: 'AAAA', mimeType: 'image/png' })).rejects.toMatchObject({ code: -32602, message: expect.stringContaining('image') })
    await expect(agent.request(methods.agent.session.prompt, { sessionId: 'nope', prompt: [{ type: 'text', text: 'x' }] })).rejects.toMatchObject({ code: -32002 })
  })

  it('embedded text resources and resource links reach the model as text', async () => {
    const { agent } = await serve([{ reply: [{ text: 'ok' }] }])
    const session = await agent.buildSession(tempCwd()).start()
    await session.prompt([
      { type: 'text', text: 'review' },
      { type: 'resource', resource: { uri: 'file:///a.txt', text: 'alpha' } },
      { type: 'resource_link', uri: 'file:///b.txt', name: 'b.txt' },
    ])
    const user = harness!.ctx.agents.get(session.sessionId)!.session.events().find((event) => event.type === 'user/message')
    expect(user).toMatchObject({
      message: { content: [{ text: 'review' }, { text: '<resource uri="file:///a.txt">\nalpha\n</resource>' }, { text: '[b.txt](file:///b.txt)' }] },
    })
  })

  it('the end of the input disposes every agent (releasing its session) before done resolves', async () => {
    const { server, agent, endInput } = await serve([{ reply: [{ text: 'slow', delay_ms: 60_000 }] }])
    const session = await agent.buildSession(tempCwd()).start()
    void session.prompt('wait').catch(() => {})
    const live = harness!.ctx.agents.get(session.sessionId)!
    await new Promise((resolve) => setTimeout(resolve, 50))
    await endInput()
    await server.done
    expect(live.status).toBe('disposed')
    expect(live.session.released).toBe(true)
    expect(harness!.ctx.agents.list()).toEqual([])
  })
})
