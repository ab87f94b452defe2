/**
 * The MCP servers an ACP client sends in `session/new` and `session/load` become that
 * session's (through `@dsh/mcp`'s ScopedServers): a real SDK client, a real harness (the
 * scripted model is the only fake) and a real MCP server from npm,
 * `@modelcontextprotocol/server-filesystem` (a devDependency of @dsh/mcp, run from where npm
 * installed it). Its tools are the session agent's alone, every call is asked of the client
 * (its readOnlyHint is the client's claim, not trusted), the server stops when the session
 * does, bad entries are refused naming the field, and a server that does not start is a
 * warning the session goes on without.
 */
import { mkdtempSync, readdirSync, readFileSync, realpathSync, writeFileSync } from 'node:fs'
import { createServer, type Server as HttpServer } from 'node:http'
import type { AddressInfo } from 'node:net'
import { tmpdir } from 'node:os'
import { dirname, join, resolve } from 'node:path'
import { fileURLToPath } from 'node:url'
import { afterEach, describe, expect, it } from 'vitest'
import { client, methods, PROTOCOL_VERSION, type ClientConnection, type McpServer, type RequestPermissionRequest, type SessionUpdate, type Stream } from '@agentclientprotocol/sdk'
import { ApprovalService } from '@dsh/approvals'
import SessionJsonl from '@dsh/session-jsonl'
import { createHarness, type Harness, type HarnessOptions } from '@dsh/testkit/harness'
import { serveAcp, type AcpServer } from '@dsh/acp-server'
// The MCP SDK's own server classes (through @dsh/mcp's dependency), for a Streamable HTTP server on 127.0.0.1.
import { Server as McpSdkServer } from '@modelcontextprotocol/sdk/server/index.js'
import { StreamableHTTPServerTransport } from '@modelcontextprotocol/sdk/server/streamableHttp.js'
import { CallToolRequestSchema, ListToolsRequestSchema } from '@modelcontextprotocol/sdk/types.js'

const repoRoot = resolve(dirname(fileURLToPath(import.meta.url)), '../../../..')
const FILESYSTEM_SERVER = join(repoRoot, 'node_modules/@modelcontextprotocol/server-filesystem/dist/index.js')

let harness: Harness | undefined
let connection: ClientConnection | undefined
let served: { server: AcpServer; endInput(): Promise<void> } | undefined
let http: HttpServer | undefined
afterEach(async () => {
  // The client's end (as when it closes dsh acp's stdin) closes its sessions, which stops their servers, before the runtime goes.
  connection?.close()
  await served?.endInput()
  await served?.server.done
  served = undefined
  await harness?.dispose()
  harness = undefined
  connection = undefined
  http?.closeAllConnections()
  await new Promise((resolveClose) => (http ? http.close(resolveClose) : resolveClose(undefined)))
  http = undefined
})

/** A stateless Streamable HTTP MCP server on 127.0.0.1 with one tool, greet, that answers only the bearer token `token`. */
async function httpServer(token: string): Promise<string> {
  http = createServer(async (request, response) => {
    if (request.headers.authorization !== `Bearer ${token}`) {
      response.writeHead(401).end('no')
      return
    }
    const server = new McpSdkServer({ name: 'web', version: '1.0.0' }, { capabilities: { tools: {} } })
    server.setRequestHandler(ListToolsRequestSchema, async () => ({ tools: [{ name: 'greet', description: 'Greet.', inputSchema: { type: 'object', properties: { who: { type: 'string' } } } }] }))
    server.setRequestHandler(CallToolRequestSchema, async (call) => ({ content: [{ type: 'text', text: `hello ${String(call.params.arguments?.who)}` }] }))
    const transport = new StreamableHTTPServerTransport({ sessionIdGenerator: undefined })
    response.on('close', () => void transport.close())
    await server.connect(transport)
    await transport.handleRequest(request, response)
  })
  await new Promise<void>((resolveListen) => http!.listen(0, '127.0.0.1', resolveListen))
  return `http://127.0.0.1:${(http.address() as AddressInfo).port}/mcp`
}

interface Served {
  agent: ClientConnection['agent']
  asked: RequestPermissionRequest[]
  warnings: string[]
  docs: string
}

/** A harness served to an SDK client that allows every permission once (and remembers what it was asked); `docs` holds notes.txt. */
async function serve(scriptOf: (docs: string) => HarnessOptions['script'], options: { sessionDir?: string; maxLiveSessions?: number } = {}): Promise<Served> {
  const docs = tempDir()
  writeFileSync(join(docs, 'notes.txt'), 'the answer is 42\n')
  harness = await createHarness({ script: scriptOf(docs) })
  const warnings: string[] = []
  harness.ctx.logger.exporter({ colors: 0, levels: { default: 2 }, export: (message) => void warnings.push(String(message.args.join(' '))) } as Parameters<typeof harness.ctx.logger.exporter>[0])
  await harness.plugin(ApprovalService)
  if (options.sessionDir !== undefined) await harness.plugin(SessionJsonl, { dir: options.sessionDir })
  const asked: RequestPermissionRequest[] = []
  const toServer = new TransformStream()
  const toClient = new TransformStream()
  const server = serveAcp(harness.ctx, { readable: toServer.readable, writable: toClient.writable } as Stream, { permission: 'ask', ...(options.maxLiveSessions !== undefined && { maxLiveSessions: options.maxLiveSessions }) })
  served = { server, endInput: () => toServer.writable.close().catch(() => {}) }
  connection = client({ name: 'test-editor' })
    .onRequest(methods.client.session.requestPermission, ({ params }) => {
      asked.push(params)
      return { outcome: { outcome: 'selected', optionId: params.options.find((option) => option.kind === 'allow_once')!.optionId } }
    })
    .connect({ readable: toClient.readable, writable: toServer.writable } as Stream)
  await connection.agent.request(methods.agent.initialize, { protocolVersion: PROTOCOL_VERSION, clientCapabilities: {} })
  return { agent: connection.agent, asked, warnings, docs }
}

function tempDir(): string {
  return realpathSync(mkdtempSync(join(tmpdir(), 'acp-mcp-')))
}

const filesServer = (docs: string, env: { name: string; value: string }[] = []): McpServer => ({ name: 'files', command: process.execPath, args: [FILESYSTEM_SERVER, docs], env })

/** The text of each finished tool call of one prompt, as the client saw it. */
async function toolResults(session: { prompt(text: string): Promise<unknown>; nextUpdate(): Promise<{ kind: string; update?: SessionUpdate }> }): Promise<string[]> {
  void session.prompt('go').catch(() => {})
  const results: string[] = []
  for (;;) {
    const message = await session.nextUpdate()
    if (message.kind === 'stop') return results
    const update = message.update!
    if (update.sessionUpdate === 'tool_call_update' && (update.status === 'completed' || update.status === 'failed')) {
      results.push((update.content ?? []).map((block) => (block.type === 'content' && block.content.type === 'text' ? block.content.text : '')).join(''))
    }
  }
}

/** The pids of the live processes running the filesystem server on `docs`. */
function serverProcesses(docs: string): number[] {
  const pids: number[] = []
  for (const pid of readdirSync('/proc').filter((name) => /^\d+$/.test(name))) {
    try {
      const cmdline = readFileSync(`/proc/${pid}/cmdline`, 'utf8')
      if (cmdline.includes(FILESYSTEM_SERVER) && cmdline.includes(docs)) pids.push(Number(pid))
    } catch {
      // Gone meanwhile.
    }
  }
  return pids
}

async function until(check: () => boolean): Promise<void> {
  while (!check()) await new Promise((resolveWait) => setTimeout(resolveWait, 20))
}

describe('acp-server: MCP servers sent by the client', () => {
  it('initialize advertises HTTP MCP servers (and not SSE)', async () => {
    harness = await createHarness({})
    await harness.plugin(ApprovalService)
    const toServer = new TransformStream()
    const toClient = new TransformStream()
    serveAcp(harness.ctx, { readable: toServer.readable, writable: toClient.writable } as Stream)
    connection = client().connect({ readable: toClient.readable, writable: toServer.writable } as Stream)
    const init = await connection.agent.request(methods.agent.initialize, { protocolVersion: PROTOCOL_VERSION, clientCapabilities: {} })
    expect(init.agentCapabilities?.mcpCapabilities).toEqual({ http: true, sse: false })
  })

  it("a session's server serves its agent: the model's call reaches it, asked of the client although the tool claims readOnlyHint; another session has no such tool; closing the session stops the server", async () => {
    const { agent, asked, docs } = await serve((dir) => [{ reply: [{ call: { tool: 'mcp__files__read_text_file', args: { path: join(dir, 'notes.txt') } } }, { text: 'read: {{last_tool_result}}' }] }])
    const session = await agent.buildSession(tempDir()).withMcpServer(filesServer(docs)).start()
    const other = await agent.buildSession(tempDir()).start()
    expect(harness!.ctx.tools.visibleNames(session.sessionId)).toContain('mcp__files__read_text_file')
    expect(harness!.ctx.tools.visibleNames(other.sessionId).filter((name) => name.startsWith('mcp__'))).toEqual([])
    expect(await toolResults(session)).toEqual(['the answer is 42\n'])
    expect(asked.map((request) => request.toolCall.title)).toEqual([expect.stringContaining('mcp__files__read_text_file')])
    expect(serverProcesses(docs)).toHaveLength(1)
    await agent.request(methods.agent.session.close, { sessionId: session.sessionId })
    await until(() => serverProcesses(docs).length === 0)
  })

  it("a stdio server gets what its entry's env names and nothing else of dsh's environment; ${NAME} in a value stays literal", async () => {
    process.env.DSH_TEST_ACP_MCP_SECRET = 'sk-of-dsh-never-for-servers'
    try {
      const fixture = join(repoRoot, 'packages/mcp/mcp/tests/fixtures/server.mjs')
      const calls = ['GIVEN', 'EXPANDED', 'DSH_TEST_ACP_MCP_SECRET'].map((name) => ({ call: { tool: 'mcp__srv__env', args: { name } } }))
      const { agent } = await serve(() => [{ reply: [...calls, { text: 'done' }] }])
      const cwd = tempDir()
      const env = [{ name: 'GIVEN', value: 'from the entry' }, { name: 'EXPANDED', value: '${DSH_TEST_ACP_MCP_SECRET}' }]
      const session = await agent.buildSession(cwd).withMcpServer({ name: 'srv', command: process.execPath, args: [fixture], env }).start()
      const results = await toolResults(session)
      expect(results).toEqual(['GIVEN=from the entry', 'EXPANDED=${DSH_TEST_ACP_MCP_SECRET}', 'DSH_TEST_ACP_MCP_SECRET=undefined'])
    } finally {
      delete process.env.DSH_TEST_ACP_MCP_SECRET
    }
  })

  it('an HTTP server is reached with the headers its entry sends; with a wrong token it is a warning naming the 401', async () => {
    const url = await httpServer('s3cret')
    const { agent, warnings } = await serve(() => [{ reply: [{ call: { tool: 'mcp__web__greet', args: { who: 'dsh' } } }, { text: 'done' }] }])
    const session = await agent.buildSession(tempDir()).withMcpServer({ type: 'http', name: 'web', url, headers: [{ name: 'Authorization', value: 'Bearer s3cret' }] }).start()
    expect(await toolResults(session)).toEqual(['hello dsh'])
    const wrong = await agent.buildSession(tempDir()).withMcpServer({ type: 'http', name: 'web', url, headers: [{ name: 'Authorization', value: 'Bearer guess' }] }).start()
    expect(harness!.ctx.tools.visibleNames(wrong.sessionId).filter((name) => name.startsWith('mcp__'))).toEqual([])
    expect(warnings).toEqual([expect.stringMatching(/^MCP server "web" \(the ACP client \(session\/new\)\) did not start: .*401.*; its tools are left out$/)])
    expect(warnings.join('\n')).not.toContain('guess')
  })

  it('a server that does not start is one warning naming it, and the session goes on without its tools', async () => {
    const { agent, warnings } = await serve(() => [{ reply: [{ text: 'still here' }] }])
    const session = await agent.buildSession(tempDir()).withMcpServer({ name: 'broken', command: join(tempDir(), 'no-such-server'), args: [], env: [{ name: 'BROKEN_TOKEN', value: 'sk-never-logged' }] }).start()
    expect(harness!.ctx.tools.visibleNames(session.sessionId).filter((name) => name.startsWith('mcp__'))).toEqual([])
    expect(await session.prompt('hello')).toMatchObject({ stopReason: 'end_turn' })
    expect(warnings).toEqual([expect.stringMatching(/^MCP server "broken" \(the ACP client \(session\/new\)\) did not start: .*; its tools are left out$/)])
    expect(warnings.join('\n')).not.toContain('sk-never-logged')
  })

  it('bad entries are refused naming the field, and nothing is created', async () => {
    const { agent } = await serve(() => [{ reply: [{ text: 'x' }] }])
    const cwd = tempDir()
    const refusal = async (mcpServers: unknown[]) => {
      const error = await agent.request(methods.agent.session.new, { cwd, mcpServers: mcpServers as McpServer[] }).then(() => undefined, (failure: unknown) => failure as { code: number; message: string; data?: unknown })
      return error && `${error.code} ${JSON.stringify(error.data)} ${error.message}`
    }
    const files = { name: 'files', command: 'x', args: [], env: [] }
    expect(await refusal([files, { ...files }])).toMatch(/^-32602 \{"field":"mcpServers\[1\]\.name"\} .*mcpServers\[1\]\.name repeats "files", the name of mcpServers\[0\]/)
    // No command at all breaks ACP's own schema: the SDK refuses it, its data naming mcpServers.0.command.
    expect(await refusal([{ name: 'files', args: [], env: [] }])).toMatch(/^-32602 .*"mcpServers":\{"0":\{.*"command":\{"_errors":\["Invalid input: expected string, received undefined"\]/)
    expect(await refusal([{ ...files, command: '' }])).toMatch(/^-32602 \{"field":"mcpServers\[0\]\.command"\} .*is missing: a stdio server needs the program to run/)
    expect(await refusal([{ ...files, name: 'my files' }])).toMatch(/^-32602 \{"field":"mcpServers\[0\]\.name"\} .*server name "my files" is not usable/)
    expect(await refusal([{ ...files, env: [{ name: 'A=B', value: 'x' }] }])).toMatch(/^-32602 \{"field":"mcpServers\[0\]\.env\[0\]\.name"\}/)
    expect(await refusal([{ type: 'http', name: 'web', url: 'file:///etc/passwd', headers: [] }])).toMatch(/^-32602 \{"field":"mcpServers\[0\]"\} .*"url" must be http: or https:, not file:/)
    expect(await refusal([{ type: 'sse', name: 'old', url: 'http://127.0.0.1:1/sse', headers: [] }])).toMatch(/^-32602 \{"field":"mcpServers\[0\]\.type"\} .*does not take .*mcpCapabilities\.sse: false/)
    expect(harness!.ctx.agents.list()).toEqual([])
  })

  it('a parked session keeps its server running, and its reopened agent has the tools again', async () => {
    const { agent, docs } = await serve((dir) => [{ reply: [{ call: { tool: 'mcp__files__read_text_file', args: { path: join(dir, 'notes.txt') } } }, { text: 'read' }] }], { sessionDir: tempDir(), maxLiveSessions: 1 })
    const session = await agent.buildSession(tempDir()).withMcpServer(filesServer(docs)).start()
    // A second session parks the first (idle, over the bound of one): its agent is disposed.
    await agent.buildSession(tempDir()).start()
    await until(() => harness!.ctx.agents.get(session.sessionId) === undefined)
    expect(serverProcesses(docs)).toHaveLength(1)
    expect(await toolResults(session)).toEqual(['the answer is 42\n'])
  })

  it('session/load starts the servers it carries for the reopened session', async () => {
    const sessionDir = tempDir()
    const { agent, docs } = await serve(() => [{ reply: [{ text: 'first' }] }], { sessionDir })
    const cwd = tempDir()
    const made = await agent.buildSession(cwd).start()
    await agent.request(methods.agent.session.close, { sessionId: made.sessionId })
    await agent.request(methods.agent.session.load, { sessionId: made.sessionId, cwd, mcpServers: [filesServer(docs)] })
    expect(harness!.ctx.tools.visibleNames(made.sessionId)).toContain('mcp__files__list_directory')
    await agent.request(methods.agent.session.close, { sessionId: made.sessionId })
    await until(() => serverProcesses(docs).length === 0)
  })
})
