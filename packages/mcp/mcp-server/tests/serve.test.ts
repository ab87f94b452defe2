/**
 * `McpServe` in process: a real harness (the scripted model is the only fake) with the
 * approval broker, an SDK `Client` over the SDK's in-memory transport. The CLI's
 * `mcp-serve.test.ts` drives the built `dsh mcp serve` over stdio and HTTP.
 */
import { afterEach, describe, expect, it } from 'vitest'
import { Client } from '@modelcontextprotocol/sdk/client/index.js'
import { InMemoryTransport } from '@modelcontextprotocol/sdk/inMemory.js'
import { StreamableHTTPClientTransport } from '@modelcontextprotocol/sdk/client/streamableHttp.js'
import type { CallToolResult } from '@modelcontextprotocol/sdk/types.js'
import { createHarness, type Harness } from '@dsh/testkit/harness'
import { ApprovalService, type ApprovalRequestInfo } from '@dsh/approvals'
import { answerOf, elicitation, interfaceHostNames, McpServe, McpServerError, serveMcpOverHttp, type HttpServing, type McpServeOptions } from '@dsh/mcp-server'

let harness: Harness | undefined
let serve: McpServe | undefined
afterEach(async () => {
  await serve?.close()
  await harness?.dispose()
  serve = undefined
  harness = undefined
})

/** A server over the harness, and a client connected to it. */
async function connect(options: McpServeOptions = {}): Promise<{ client: Client; serve: McpServe }> {
  harness = await createHarness({ script: [{ when: { prompt: '^slow' }, reply: [{ delay_ms: 600_000, text: 'late' }] }, { reply: [{ text: 'quick' }] }] })
  await harness.plugin(ApprovalService, {})
  serve = new McpServe(harness.ctx, options)
  const [clientSide, serverSide] = InMemoryTransport.createLinkedPair()
  await serve.connect(serverSide)
  const client = new Client({ name: 'test', version: '1.0.0' })
  await client.connect(clientSide)
  return { client, serve }
}

async function until(ready: () => boolean): Promise<void> {
  while (!ready()) await new Promise((resolve) => setTimeout(resolve, 10))
}

const textOf = (result: CallToolResult) => result.content.map((part) => (part.type === 'text' ? part.text : '')).join('')

describe('McpServe', () => {
  it('offers delegate alone without helper definitions, and answers a call with the agent\'s answer', async () => {
    const { client } = await connect()
    expect((await client.listTools()).tools.map((tool) => tool.name)).toEqual(['delegate'])
    const result = (await client.callTool({ name: 'delegate', arguments: { prompt: 'hello' } })) as CallToolResult
    expect(textOf(result)).toBe('quick')
    expect((result._meta as { dsh: { stop: string } }).dsh.stop).toBe('completed')
  })

  it('flooding calls is bounded: past maxCalls running and maxQueued waiting a call is refused at once, naming the bound; cancelled calls free their places', async () => {
    const { client, serve } = await connect({ maxCalls: 1, maxQueued: 1 })
    const first = new AbortController()
    const second = new AbortController()
    const running = client.callTool({ name: 'delegate', arguments: { prompt: 'slow one' } }, undefined, { signal: first.signal })
    const waiting = client.callTool({ name: 'delegate', arguments: { prompt: 'slow two' } }, undefined, { signal: second.signal })
    running.catch(() => {})
    waiting.catch(() => {})
    await until(() => serve.callCount === 2)
    const refused = (await client.callTool({ name: 'delegate', arguments: { prompt: 'slow three' } })) as CallToolResult
    expect(refused.isError).toBe(true)
    expect(textOf(refused)).toBe('delegate: dsh mcp serve is at its bound: 1 calls run and 1 wait; call again once one has ended')
    first.abort('done')
    second.abort('done')
    await expect(running).rejects.toThrow()
    await expect(waiting).rejects.toThrow()
    await until(() => serve.callCount === 0)
    expect(textOf((await client.callTool({ name: 'delegate', arguments: { prompt: 'hello' } })) as CallToolResult)).toBe('quick')
  })

  it('refuses to start without the approval broker (nothing would decide side effects), and with a bound that is not one', async () => {
    const bare = await createHarness()
    harness = bare
    expect(() => new McpServe(bare.ctx)).toThrow(McpServerError)
    expect(() => new McpServe(bare.ctx)).toThrow(/no approval broker/)
    await bare.plugin(ApprovalService, {})
    expect(() => new McpServe(bare.ctx, { maxCalls: 0 })).toThrow(/maxCalls must be a whole number of at least 1/)
  })
})

describe('the approval form', () => {
  /** The request the real broker puts to a front-end for `command`. */
  async function requestFor(command: string): Promise<ApprovalRequestInfo> {
    harness = await createHarness({ script: [{ reply: [{ text: 'unused' }] }] })
    await harness.plugin(ApprovalService, {})
    const asked: ApprovalRequestInfo[] = []
    harness.ctx.approvals.addFrontEnd({ name: 'capture', serves: () => true, ask: async (request) => (asked.push(request), { decision: 'reject', by: 'the test' }) })
    const agent = await harness.agent()
    await harness.ctx.approvals.request({ agent, tool: 'bash', args: { command }, signal: new AbortController().signal })
    return asked[0]!
  }

  it('shows the whole command: its tail past 400 characters of padding is there', async () => {
    const message = elicitation(await requestFor(`echo checking ${' '.repeat(420)}; touch PWN`)).message
    expect(message).toContain('; touch PWN')
    expect(message).toMatch(/wants to run bash:\n/)
  })

  it('shows carriage returns, escape sequences and bidi overrides as escapes, never raw', async () => {
    const message = elicitation(await requestFor('touch PWN; : \r\u001b[2Kecho "\u202eNWP hcuot"')).message
    expect(message).not.toMatch(/[\r\u001b\u202e]/)
    expect(message).toContain('touch PWN; : \\x0d\\x1b[2Kecho "\\u202eNWP hcuot"')
  })
})

describe('an elicitation answer', () => {
  it('allows only an accepted form naming allow-once or allow-always; anything else rejects, saying why', () => {
    expect(answerOf('accept', { decision: 'allow-once' })).toMatchObject({ decision: 'allow-once' })
    expect(answerOf('accept', { decision: 'allow-always' })).toMatchObject({ decision: 'allow-always' })
    expect(answerOf('accept', { decision: 'reject' })).toMatchObject({ decision: 'reject', reason: "the MCP client's user rejected it" })
    expect(answerOf('accept', { decision: 'yes please' })).toMatchObject({ decision: 'reject', reason: expect.stringMatching(/not one of allow-once, allow-always, reject/) })
    expect(answerOf('accept', undefined)).toMatchObject({ decision: 'reject' })
    expect(answerOf('decline', { decision: 'allow-once' })).toMatchObject({ decision: 'reject', reason: "the MCP client's user declined" })
    expect(answerOf('cancel', {})).toMatchObject({ decision: 'reject', reason: "the MCP client's user dismissed the request" })
  })
})

describe('serveMcpOverHttp', () => {
  let http: HttpServing | undefined
  const httpClients: Client[] = []
  afterEach(async () => {
    await Promise.all(httpClients.splice(0).map((client) => client.close().catch(() => {})))
    await http?.close()
    http = undefined
  })

  async function httpClient(url: string): Promise<{ client: Client; transport: StreamableHTTPClientTransport }> {
    const client = new Client({ name: 'test', version: '1.0.0' })
    const transport = new StreamableHTTPClientTransport(new URL(url))
    httpClients.push(client)
    await client.connect(transport)
    return { client, transport }
  }

  it('without a token asks no approvals of its clients (any local process could be one and approve its own commands): ask is refused, naming what to pass', async () => {
    harness = await createHarness({ script: [{ reply: [{ text: 'quick' }] }] })
    await harness.plugin(ApprovalService, {})
    await expect(serveMcpOverHttp(harness.ctx, {})).rejects.toThrow(/refusing to ask approvals of HTTP clients without a token.*--token-env NAME.*--permission reject/)
    http = await serveMcpOverHttp(harness.ctx, { token: 'sekrit' })
    expect(http.url).toMatch(/^http:\/\/127\.0\.0\.1:\d+\/mcp$/)
  })

  it("on a wildcard address it answers to this machine's interface addresses (a client elsewhere names one as Host) and shows one in its URL", () => {
    const interfaces = {
      lo: [{ address: '127.0.0.1', netmask: '255.0.0.0', family: 'IPv4', mac: '00:00:00:00:00:00', internal: true, cidr: '127.0.0.1/8' }],
      eth0: [
        { address: '192.0.2.2', netmask: '255.255.255.0', family: 'IPv4', mac: '02:00:00:00:00:01', internal: false, cidr: '192.0.2.2/24' },
        { address: 'fd00::2', netmask: 'ffff:ffff:ffff:ffff::', family: 'IPv6', mac: '02:00:00:00:00:01', internal: false, cidr: 'fd00::2/64', scopeid: 0 },
        { address: 'fe80::1', netmask: 'ffff:ffff:ffff:ffff::', family: 'IPv6', mac: '02:00:00:00:00:01', internal: false, cidr: 'fe80::1/64', scopeid: 4 },
      ],
    } as const
    expect(interfaceHostNames('0.0.0.0', 8080, interfaces as never)).toEqual(['192.0.2.2:8080'])
    expect(interfaceHostNames('::', 8080, interfaces as never)).toEqual(['192.0.2.2:8080', '[fd00::2]:8080'])
    expect(interfaceHostNames('127.0.0.1', 8080, interfaces as never)).toEqual([])
  })

  it('on 0.0.0.0 with a token its URL names an address of this machine, which reaches it: the token is asked for (401), the Host is not refused (403)', async () => {
    const reachable = interfaceHostNames('0.0.0.0', 1)
    if (reachable.length === 0) throw new Error('this test needs a network interface besides loopback')
    harness = await createHarness({ script: [{ reply: [{ text: 'quick' }] }] })
    await harness.plugin(ApprovalService, {})
    http = await serveMcpOverHttp(harness.ctx, { host: '0.0.0.0', token: 'sekrit' })
    expect(http.url).toBe(`http://${reachable[0]!.replace(/:1$/, '')}:${new URL(http.url).port}/mcp`)
    const body = JSON.stringify({ jsonrpc: '2.0', id: 1, method: 'tools/list' })
    const headers = { 'content-type': 'application/json', accept: 'application/json, text/event-stream' }
    expect((await fetch(http.url, { method: 'POST', headers, body })).status).toBe(401)
    const client = new Client({ name: 'test', version: '1.0.0' })
    httpClients.push(client)
    await client.connect(new StreamableHTTPClientTransport(new URL(http.url), { requestInit: { headers: { Authorization: 'Bearer sekrit' } } }))
    expect((await client.listTools()).tools.map((tool) => tool.name)).toContain('delegate')
  })

  it('at its session bound a new client takes the place of the one idle longest (which is told to initialize again); while every session is busy a new one is refused (503)', async () => {
    harness = await createHarness({ script: [{ reply: [{ text: 'quick' }] }] })
    await harness.plugin(ApprovalService, {})
    http = await serveMcpOverHttp(harness.ctx, { maxSessions: 1, permission: 'reject' })
    const served = http
    const first = await httpClient(served.url)
    const firstId = first.transport.sessionId!
    // The SDK's client keeps a stream open (GET): the session is busy until the client goes.
    await until(() => served.sessions.busy === 1)
    await expect(httpClient(served.url)).rejects.toThrow(/503|every one has a request in flight/)
    await first.client.close()
    await until(() => served.sessions.busy === 0)
    const second = await httpClient(served.url)
    expect(textOf((await second.client.callTool({ name: 'delegate', arguments: { prompt: 'hello' } })) as CallToolResult)).toBe('quick')
    expect(served.sessions.open).toBe(1)
    const stale = await fetch(served.url, { method: 'POST', headers: { 'content-type': 'application/json', accept: 'application/json, text/event-stream', 'mcp-session-id': firstId }, body: JSON.stringify({ jsonrpc: '2.0', id: 9, method: 'tools/list' }) })
    expect(stale.status).toBe(404)
  })
})
