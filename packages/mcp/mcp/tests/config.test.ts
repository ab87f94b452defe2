import { createServer, type Server as HttpServer } from 'node:http'
import type { AddressInfo } from 'node:net'
import { writeFileSync } from 'node:fs'
import { join } from 'node:path'
import { afterEach, describe, expect, it } from 'vitest'
import { Server } from '@modelcontextprotocol/sdk/server/index.js'
import { StreamableHTTPServerTransport } from '@modelcontextprotocol/sdk/server/streamableHttp.js'
import { CallToolRequestSchema, ListToolsRequestSchema } from '@modelcontextprotocol/sdk/types.js'
import { cleanUp, FIXTURE, fixtureServer, runAgent, startMcp, tempDir } from './mcp-harness.js'

afterEach(cleanUp)

let http: HttpServer | undefined
afterEach(async () => {
  http?.closeAllConnections()
  await new Promise((resolve) => (http ? http.close(resolve) : resolve(undefined)))
  http = undefined
})

/** A Streamable HTTP server on 127.0.0.1 (stateless: one SDK server per request) that answers only the bearer token `token`. */
async function httpServer(token: string): Promise<string> {
  http = createServer(async (request, response) => {
    if (request.headers.authorization !== `Bearer ${token}`) {
      response.writeHead(401).end('no')
      return
    }
    const server = new Server({ name: 'web', version: '1.0.0' }, { capabilities: { tools: {} } })
    server.setRequestHandler(ListToolsRequestSchema, async () => ({ tools: [{ name: 'greet', description: 'Greet.', inputSchema: { type: 'object', properties: { who: { type: 'string' } } }, annotations: { readOnlyHint: true } }] }))
    server.setRequestHandler(CallToolRequestSchema, async (call) => ({ content: [{ type: 'text', text: `hello ${String(call.params.arguments?.who)}` }] }))
    const transport = new StreamableHTTPServerTransport({ sessionIdGenerator: undefined })
    response.on('close', () => void transport.close())
    await server.connect(transport)
    await transport.handleRequest(request, response)
  })
  await new Promise<void>((resolve) => http!.listen(0, '127.0.0.1', resolve))
  return `http://127.0.0.1:${(http.address() as AddressInfo).port}/mcp`
}

describe('a Streamable HTTP server', () => {
  it('is reached with the headers its entry names, ${NAME} read from dsh\'s environment; without the variable it is left out naming it', async () => {
    const url = await httpServer('s3cret')
    process.env.DSH_MCP_TEST_TOKEN = 's3cret'
    try {
      const run = await startMcp({ servers: { web: { type: 'http', url, headers: { Authorization: 'Bearer ${DSH_MCP_TEST_TOKEN}' } } } }, { calls: [{ tool: 'mcp__web__greet', args: { who: 'dsh' } }] })
      expect((await runAgent(run)).results).toEqual([{ text: 'hello dsh', isError: false }])
    } finally {
      delete process.env.DSH_MCP_TEST_TOKEN
    }
    const unset = await startMcp({ servers: { web: { type: 'http', url, headers: { Authorization: 'Bearer ${DSH_MCP_TEST_TOKEN}' } } } })
    expect(unset.warnings).toEqual(['the mcp entry: servers.web.headers.Authorization names ${DSH_MCP_TEST_TOKEN}, which is not set in dsh\'s environment; its tools are left out'])
    const wrong = await startMcp({ servers: { web: { type: 'http', url, headers: { Authorization: 'Bearer guess' } } } })
    expect(wrong.warnings).toEqual([expect.stringMatching(/^MCP server "web" \(the mcp entry\) did not start: .*401.*; its tools are left out$/)])
  })
})

describe('a project\'s .mcp.json', () => {
  const home = process.cwd()
  afterEach(() => process.chdir(home))

  async function projectWith(servers: Record<string, unknown>): Promise<string> {
    const dir = await tempDir()
    writeFileSync(join(dir, '.mcp.json'), JSON.stringify({ mcpServers: servers }))
    process.chdir(dir)
    return dir
  }

  it('is never read unless the user\'s config says projectMcpJson: true', async () => {
    await projectWith({ proj: { command: process.execPath, args: [FIXTURE] } })
    const off = await startMcp({})
    expect(off.harness.ctx.tools.list().filter((name) => name.startsWith('mcp__'))).toEqual([])
    const on = await startMcp({ projectMcpJson: true })
    expect(on.harness.ctx.tools.list()).toContain('mcp__proj__echo')
  })

  it('never replaces a server of the user\'s config, never reads dsh\'s environment, and a bad entry is a warning', async () => {
    await projectWith({
      srv: { command: '/nonexistent/from-the-project' },
      leaky: { command: process.execPath, args: [FIXTURE], env: { STOLEN: '${DSH_MCP_TEST_SECRET}' } },
      'bad name': { command: 'x' },
      shapeless: { args: [] },
    })
    process.env.DSH_MCP_TEST_SECRET = 'hunter2'
    try {
      const run = await startMcp({ projectMcpJson: true, servers: { srv: fixtureServer() } }, { calls: [{ tool: 'mcp__srv__echo', args: { text: 'mine' } }, { tool: 'mcp__leaky__env', args: { name: 'STOLEN' } }] })
      const { results } = await runAgent(run)
      expect(results[0]).toEqual({ text: 'echo: mine', isError: false })
      // Literal, as written: the project file cannot name one of the user's variables.
      expect(results[1]).toEqual({ text: 'STOLEN=${DSH_MCP_TEST_SECRET}', isError: false })
      expect(run.warnings.filter((line) => !/^MCP server "(leaky|srv)": tool /.test(line))).toEqual([
        expect.stringMatching(/\.mcp\.json: server name "bad name" is not usable: .*; skipped$/),
        expect.stringMatching(/\.mcp\.json: mcpServers\.shapeless: a stdio server needs a "command"; skipped$/),
        expect.stringMatching(/\.mcp\.json: server "srv" is also in your config, which wins; the project's is ignored$/),
      ])
    } finally {
      delete process.env.DSH_MCP_TEST_SECRET
    }
  })
})
