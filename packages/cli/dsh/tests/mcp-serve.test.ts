/**
 * `dsh mcp serve` driven by the official MCP SDK client (`Client` with the SDK's stdio and
 * Streamable HTTP transports), against the built CLI with a scripted model: the helpers are
 * listed as tools, a call runs a delegation whose spawned child answers, progress arrives
 * as progress notifications, a cancelled call's child process is gone, a side effect is
 * asked of the client through elicitation (and rejected for a client that cannot be asked),
 * and over HTTP a request without the token (401) or with a foreign Host (403) is refused.
 */
import { appendFileSync, existsSync, mkdirSync, readFileSync, writeFileSync } from 'node:fs'
import { request as httpRequest } from 'node:http'
import { join } from 'node:path'
import { afterEach, describe, expect, it } from 'vitest'
import { Client } from '@modelcontextprotocol/sdk/client/index.js'
import { StdioClientTransport } from '@modelcontextprotocol/sdk/client/stdio.js'
import { StreamableHTTPClientTransport } from '@modelcontextprotocol/sdk/client/streamableHttp.js'
import { ElicitRequestSchema, type CallToolResult, type Progress } from '@modelcontextprotocol/sdk/types.js'
import { exists } from '@dsh/testkit'
import { dshBin, repoRoot, tempDir } from './cli.js'
import { until } from './processes.js'
import { serveMcp, type ServedMcp } from './mcp-serve-process.js'

/** The script; `pidFile` is where the sleeping command writes its pid. */
const script = (pidFile: string) => [
  // The helper's turn: delegate to a spawned child, answer with what it said.
  '- when: { prompt: "^review" }',
  '  reply:',
  '    - call: { tool: subagent, args: { agent: general, description: checker, prompt: "check it" } }',
  '    - text: "reviewer heard: {{last_tool_result}}"',
  '- when: { prompt: "^check it" }',
  '  reply:',
  '    - text: "checked by the spawned child"',
  // A call that waits: its child runs a command that writes its pid and sleeps.
  '- when: { prompt: "^wait" }',
  '  reply:',
  '    - call: { tool: subagent, args: { agent: general, description: sleeper, prompt: "sleep now" } }',
  '    - text: "{{last_tool_result}}"',
  '- when: { prompt: "^sleep now" }',
  '  reply:',
  `    - call: { tool: bash, args: { command: "echo $$ > ${pidFile}; exec sleep 600" } }`,
  '    - text: "woke"',
  // A side effect no rule decides.
  '- when: { prompt: "^touch" }',
  '  reply:',
  '    - call: { tool: bash, args: { command: "echo touched" } }',
  '    - text: "bash said: {{last_tool_result}}"',
  '- reply:',
  '    - text: "plain answer"',
  '',
].join('\n')

interface Setup {
  dir: string
  home: string
  pidFile: string
  args: string[]
  env: Record<string, string>
}

/** A home with one helper, a config allowing `sleep` commands (and nothing else), the script. */
function setup(): Setup {
  const dir = tempDir('dsh-mcp-serve-')
  const home = join(dir, 'home')
  mkdirSync(join(home, 'agents'), { recursive: true })
  writeFileSync(join(home, 'agents', 'reviewer.md'), '---\nname: reviewer\ndescription: Reviews a change.\n---\nYou review changes.\n')
  const pidFile = join(dir, 'sleep.pid')
  writeFileSync(join(dir, 'script.yml'), script(pidFile))
  writeFileSync(join(dir, 'dsh.yml'), ['- id: approvals', '  name: "@dsh/approvals"', `  config: { allow: ["bash(echo $$ > ${pidFile}; exec sleep 600)"] }`, ''].join('\n'))
  return { dir, home, pidFile, args: ['--config', join(dir, 'dsh.yml'), '--model', `scripted:${join(dir, 'script.yml')}`, '--session-dir', join(dir, 'sessions')], env: { DSH_HOME: home } }
}

/** For a test that starts several servers or runs several delegations in turn: time for a loaded machine, not a bound on speed. */
const SEVERAL_SERVERS_MS = 120_000

const clients: Client[] = []
afterEach(async () => {
  await Promise.all(clients.splice(0).map((client) => client.close().catch(() => {})))
})

/** An SDK client over stdio to `dsh mcp serve` (the built CLI), with elicitation declared when `answer` is given. */
async function stdioClient(setup: Setup, extra: string[] = [], answer?: (message: string) => { action: 'accept' | 'decline'; content?: Record<string, string> }): Promise<{ client: Client; transport: StdioClientTransport; stderr: () => string }> {
  const transport = new StdioClientTransport({ command: process.execPath, args: [dshBin, 'mcp', 'serve', ...setup.args, ...extra], cwd: setup.dir, env: { ...(process.env as Record<string, string>), ...setup.env }, stderr: 'pipe' })
  let stderr = ''
  transport.stderr?.on('data', (chunk: Buffer) => (stderr += chunk))
  const client = new Client({ name: 'test', version: '1.0.0' }, { capabilities: answer ? { elicitation: {} } : {} })
  if (answer) client.setRequestHandler(ElicitRequestSchema, (request) => answer(request.params.message))
  clients.push(client)
  await client.connect(transport)
  return { client, transport, stderr: () => stderr }
}

function textOf(result: CallToolResult): string {
  return result.content.map((part) => (part.type === 'text' ? part.text : '')).join('')
}

function running(pid: number): boolean {
  if (!exists(pid)) return false
  try {
    return !/^\d+ \(.*\) Z /s.test(readFileSync(`/proc/${pid}/stat`, 'utf8'))
  } catch {
    return false
  }
}

describe('dsh mcp serve over stdio, driven by the MCP SDK client', () => {
  it('lists the helpers and delegate as tools taking { prompt }; a call runs a delegation whose spawned child answers, with progress and usage in _meta', async () => {
    const s = setup()
    const { client } = await stdioClient(s)
    const { tools } = await client.listTools()
    expect(tools.map((tool) => tool.name)).toEqual(['delegate', 'reviewer'])
    const reviewer = tools.find((tool) => tool.name === 'reviewer')!
    expect(reviewer.description).toBe('Reviews a change.')
    expect(reviewer.inputSchema).toMatchObject({ type: 'object', required: ['prompt'], properties: { prompt: { type: 'string' } } })
    const progress: Progress[] = []
    const traceparent = '00-0af7651916cd43dd8448eb211c80319c-b7ad6b7169203331-01'
    const result = (await client.callTool({ name: 'reviewer', arguments: { prompt: 'review my change' }, _meta: { traceparent } }, undefined, { onprogress: (update) => void progress.push(update) })) as CallToolResult
    expect(result.isError ?? false).toBe(false)
    expect(textOf(result)).toBe('reviewer heard: checked by the spawned child')
    expect(progress.map((update) => update.message)).toContainEqual(expect.stringMatching(/^calling subagent /))
    // Progress counts up.
    expect(progress.map((update) => update.progress)).toEqual([...progress.map((update) => update.progress)].sort((a, b) => a - b))
    const dsh = (result._meta as { dsh: { session: string; stop: string; usage: { inputTokens: number; outputTokens: number } } }).dsh
    expect(dsh.stop).toBe('completed')
    expect(dsh.usage.outputTokens).toBeGreaterThan(0)
    // The call's session: served over MCP as the helper, in the client's trace.
    const header = (JSON.parse(readFileSync(join(s.dir, 'sessions', `${dsh.session}.jsonl`), 'utf8').split('\n', 1)[0]!) as { header: { origin: string; helper: { name: string }; trace: { traceparent: string } } }).header
    expect(header.origin).toBe('mcp')
    expect(header.helper.name).toBe('reviewer')
    expect(header.trace.traceparent).toBe(traceparent)
  })

  it('an unknown tool is an error result naming it and the tools there are; bad arguments are an error result naming the argument', async () => {
    const { client } = await stdioClient(setup())
    const unknown = (await client.callTool({ name: 'nope', arguments: { prompt: 'x' } })) as CallToolResult
    expect(unknown.isError).toBe(true)
    expect(textOf(unknown)).toBe('unknown tool "nope"; this server\'s tools: delegate, reviewer')
    const wrongType = (await client.callTool({ name: 'reviewer', arguments: { prompt: 5 } })) as CallToolResult
    expect(wrongType.isError).toBe(true)
    expect(textOf(wrongType)).toBe('reviewer: the argument "prompt" must be a non-empty string (got number)')
    const extra = (await client.callTool({ name: 'delegate', arguments: { prompt: 'hi', model: 'x' } })) as CallToolResult
    expect(textOf(extra)).toBe('delegate: unknown argument "model"; the only argument is "prompt"')
    // The server goes on serving.
    expect(textOf((await client.callTool({ name: 'delegate', arguments: { prompt: 'hello' } })) as CallToolResult)).toBe('plain answer')
  })

  it("cancelling a call (notifications/cancelled) stops its child: the child's command is gone, and the server answers the next call", async () => {
    const s = setup()
    const { client, stderr } = await stdioClient(s)
    const cancel = new AbortController()
    const waiting = client.callTool({ name: 'delegate', arguments: { prompt: 'wait for it' } }, undefined, { signal: cancel.signal })
    let settled: unknown
    waiting.then((result) => (settled = result), () => {})
    await until(() => existsSync(s.pidFile) && readFileSync(s.pidFile, 'utf8').endsWith('\n'), () => (settled !== undefined ? `the call ended before its command started: ${JSON.stringify(settled)}` : undefined))
    const pid = Number(readFileSync(s.pidFile, 'utf8').trim())
    expect(running(pid)).toBe(true)
    cancel.abort('the test cancels it')
    await expect(waiting).rejects.toThrow(/the test cancels it/)
    await until(() => !running(pid))
    await until(() => /call 1 aborted/.test(stderr()))
    expect(textOf((await client.callTool({ name: 'delegate', arguments: { prompt: 'hello' } })) as CallToolResult)).toBe('plain answer')
  })

  it('a client that closes its end while a call runs ends the server: the call is stopped, its child\'s command is gone, and dsh exits saying why', async () => {
    const s = setup()
    const { client, transport, stderr } = await stdioClient(s)
    const serverPid = transport.pid!
    const waiting = client.callTool({ name: 'delegate', arguments: { prompt: 'wait for it' } })
    waiting.catch(() => {})
    await until(() => existsSync(s.pidFile) && readFileSync(s.pidFile, 'utf8').endsWith('\n'))
    const pid = Number(readFileSync(s.pidFile, 'utf8').trim())
    // The SDK's client closes the server's stdin first (signals come only seconds later).
    await client.close()
    // Its last line, read from the pipe: seeing the process gone does not mean its stderr has been read.
    await until(() => stderr().includes('dsh mcp: exiting: the client closed stdin'))
    await until(() => !running(serverPid))
    expect(running(pid)).toBe(false)
    expect(stderr()).toMatch(/dsh mcp: call 1 aborted/)
  })

  it("the config's tree cap bounds the calls (the client's children, as it sees them): with tree.maxConcurrent 1 and maxQueued 1, a third call while one runs and one waits is refused, naming the bound", async () => {
    const s = setup()
    appendFileSync(join(s.dir, 'dsh.yml'), '- id: subagents\n  name: "@dsh/subagent"\n  config: { tree: { maxConcurrent: 1, maxQueued: 1 } }\n')
    const { client, stderr } = await stdioClient(s)
    const running = client.callTool({ name: 'delegate', arguments: { prompt: 'wait for it' } })
    running.catch(() => {})
    await until(() => existsSync(s.pidFile) && readFileSync(s.pidFile, 'utf8').endsWith('\n'))
    const waiting = client.callTool({ name: 'delegate', arguments: { prompt: 'hello' } })
    waiting.catch(() => {})
    await until(() => /dsh mcp: call 2 started/.test(stderr()))
    const refused = (await client.callTool({ name: 'delegate', arguments: { prompt: 'hello' } })) as CallToolResult
    expect(refused.isError).toBe(true)
    expect(textOf(refused)).toBe('delegate: dsh mcp serve is at its bound: 1 calls run and 1 wait; call again once one has ended')
  })

  it('a side effect no rule decides is asked of the client through elicitation; a client without elicitation is not asked and it is rejected', async () => {
    const s = setup()
    const asked: string[] = []
    const { client } = await stdioClient(s, [], (message) => {
      asked.push(message)
      return { action: 'accept', content: { decision: 'allow-once' } }
    })
    const allowed = (await client.callTool({ name: 'delegate', arguments: { prompt: 'touch it' } })) as CallToolResult
    expect(textOf(allowed)).toMatch(/^bash said: exit code 0\ntouched/)
    expect(asked).toEqual(['dsh mcp wants to run bash:\necho touched\nAllow it?'])

    const declined = await stdioClient(s, [], () => ({ action: 'decline' }))
    expect(textOf((await declined.client.callTool({ name: 'delegate', arguments: { prompt: 'touch it' } })) as CallToolResult)).toMatch(/^bash said: bash was not run: .*declined/)

    const unasked = await stdioClient(s)
    expect(textOf((await unasked.client.callTool({ name: 'delegate', arguments: { prompt: 'touch it' } })) as CallToolResult)).toMatch(/^bash said: bash was not run: .*did not declare the elicitation capability/)

    // A client that takes only URL elicitation cannot be shown the form: not asked either.
    const urlOnly = new Client({ name: 'test', version: '1.0.0' }, { capabilities: { elicitation: { url: {} } } })
    clients.push(urlOnly)
    await urlOnly.connect(new StdioClientTransport({ command: process.execPath, args: [dshBin, 'mcp', 'serve', ...s.args], cwd: s.dir, env: { ...(process.env as Record<string, string>), ...s.env }, stderr: 'ignore' }))
    expect(textOf((await urlOnly.callTool({ name: 'delegate', arguments: { prompt: 'touch it' } })) as CallToolResult)).toMatch(/^bash said: bash was not run: .*did not declare the elicitation capability/)
    // Four servers started one after another (each a Node process, a bundle and a composition):
    // the file's 30 s is too little beside other heavy test files on a loaded machine.
  }, SEVERAL_SERVERS_MS)
})

describe('dsh mcp serve --http', () => {
  let served: ServedMcp | undefined
  afterEach(async () => {
    await served?.stop()
    served = undefined
  })

  /** A raw request to the endpoint, with these headers: its status. */
  function post(url: string, headers: Record<string, string>): Promise<{ status: number; body: string }> {
    return new Promise((resolve, reject) => {
      const request = httpRequest(url, { method: 'POST', headers: { 'content-type': 'application/json', accept: 'application/json, text/event-stream', ...headers } }, (response) => {
        let body = ''
        response.on('data', (chunk: Buffer) => (body += chunk))
        response.on('end', () => resolve({ status: response.statusCode ?? 0, body }))
      })
      request.on('error', reject)
      request.end(JSON.stringify({ jsonrpc: '2.0', id: 1, method: 'initialize', params: { protocolVersion: '2025-06-18', capabilities: {}, clientInfo: { name: 'raw', version: '1' } } }))
    })
  }

  it('prints its URL on 127.0.0.1; refuses a request without the token (401) or with a foreign Host (403); the SDK client with the token calls a helper', async () => {
    const s = setup()
    served = await serveMcp(['--http', '--token-env', 'MCP_TOKEN', ...s.args], { ...s.env, MCP_TOKEN: 'sekrit-token' }, s.dir)
    expect(served.url).toMatch(/^http:\/\/127\.0\.0\.1:\d+\/mcp$/)
    const port = new URL(served.url).port

    const without = await post(served.url, {})
    expect(without.status).toBe(401)
    expect(without.body).toContain('the request has no Authorization header')
    expect((await post(served.url, { authorization: 'Bearer wrong' })).status).toBe(401)
    const foreign = await post(served.url, { authorization: 'Bearer sekrit-token', host: `evil.example:${port}` })
    expect(foreign.status).toBe(403)
    expect(JSON.parse(foreign.body).error.message).toContain('the Host header "evil.example')
    expect((await post(served.url, { authorization: 'Bearer sekrit-token', origin: 'https://evil.example' })).status).toBe(403)

    // The SDK client without the token is refused too.
    const refused = new Client({ name: 'test', version: '1.0.0' })
    clients.push(refused)
    await expect(refused.connect(new StreamableHTTPClientTransport(new URL(served.url)))).rejects.toThrow(/401/)

    const client = new Client({ name: 'test', version: '1.0.0' })
    clients.push(client)
    await client.connect(new StreamableHTTPClientTransport(new URL(served.url), { requestInit: { headers: { Authorization: 'Bearer sekrit-token' } } }))
    expect((await client.listTools()).tools.map((tool) => tool.name)).toEqual(['delegate', 'reviewer'])
    const progress: Progress[] = []
    const result = (await client.callTool({ name: 'reviewer', arguments: { prompt: 'review this' } }, undefined, { onprogress: (update) => void progress.push(update) })) as CallToolResult
    expect(textOf(result)).toBe('reviewer heard: checked by the spawned child')
    expect(progress.map((update) => update.message)).toContainEqual(expect.stringMatching(/^calling subagent /))

    // Elicitation reaches a client over HTTP too (on the call's own stream).
    const asking = new Client({ name: 'test', version: '1.0.0' }, { capabilities: { elicitation: {} } })
    clients.push(asking)
    asking.setRequestHandler(ElicitRequestSchema, () => ({ action: 'accept', content: { decision: 'allow-once' } }))
    await asking.connect(new StreamableHTTPClientTransport(new URL(served.url), { requestInit: { headers: { Authorization: 'Bearer sekrit-token' } } }))
    expect(textOf((await asking.callTool({ name: 'delegate', arguments: { prompt: 'touch it' } })) as CallToolResult)).toMatch(/^bash said: exit code 0\ntouched/)
  }, SEVERAL_SERVERS_MS)

  it('refuses to listen beyond loopback without a token, in one line', async () => {
    const s = setup()
    const { runDsh } = await import('./cli.js')
    const result = await runDsh(['mcp', 'serve', '--http', '--host', '0.0.0.0', ...s.args], { cwd: repoRoot, env: s.env })
    expect(result.code).toBe(2)
    expect(result.stderr).toContain('dsh mcp serve: refusing to listen on 0.0.0.0 without a token')
  })

  it('on loopback without a token refuses --permission ask (any local process could approve its own commands), and serves with --permission reject', async () => {
    const s = setup()
    const { runDsh } = await import('./cli.js')
    const result = await runDsh(['mcp', 'serve', '--http', ...s.args], { cwd: repoRoot, env: s.env })
    expect(result.code).toBe(2)
    expect(result.stderr).toContain('dsh mcp serve: refusing to ask approvals of HTTP clients without a token')
    served = await serveMcp(['--http', '--permission', 'reject', ...s.args], s.env, s.dir)
    expect(served.url).toMatch(/^http:\/\/127\.0\.0\.1:\d+\/mcp$/)
  })
})
