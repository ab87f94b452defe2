/**
 * MCP servers across the ACP boundary, through the built dsh, on a real third-party server
 * from npm (`@modelcontextprotocol/server-filesystem`, a devDependency of @dsh/mcp):
 *
 * - `dsh run` delegates to a helper on the `acp` provider whose `mcpServers:` names the
 *   user's server; its `dsh acp` child receives the server in `session/new`, starts it for
 *   that session, its scripted model calls one of its tools (decided by the broker under the
 *   root's rule), and the answer reaches the scripted parent.
 * - The official ACP SDK client sends `mcpServers` to `dsh acp`: the scripted model's call
 *   reaches the server, it is asked of the client although the tool says it only reads, the
 *   entry's variable never shows in the logs or the session, and the server is gone once the
 *   client leaves.
 */
import { mkdirSync, readdirSync, readFileSync, writeFileSync } from 'node:fs'
import { join } from 'node:path'
import { afterEach, describe, expect, it } from 'vitest'
import { methods, PROTOCOL_VERSION, type SessionUpdate } from '@agentclientprotocol/sdk'
import { dshBin, repoRoot, runDsh, tempDir } from './cli.js'
import { killTrustRunning, pick, serveTrusted } from './acp-trust-client.js'

const FILESYSTEM_SERVER = join(repoRoot, 'node_modules/@modelcontextprotocol/server-filesystem/dist/index.js')

afterEach(killTrustRunning)

/** Every event of every session file in `dir`, with whether its session has a parent. */
function sessionEvents(dir: string): { child: boolean; event: Record<string, any> }[] {
  return readdirSync(dir)
    .filter((name) => name.endsWith('.jsonl'))
    .flatMap((name) => {
      const [head, ...rest] = readFileSync(join(dir, name), 'utf8').trim().split('\n').map((line) => JSON.parse(line) as Record<string, any>)
      return rest.map((event) => ({ child: head!.header.parentSession !== undefined, event }))
    })
}

/** The pids of live processes running the filesystem server on `docs`. */
function serversOn(docs: string): number[] {
  return readdirSync('/proc')
    .filter((name) => /^\d+$/.test(name))
    .filter((pid) => {
      try {
        const cmdline = readFileSync(`/proc/${pid}/cmdline`, 'utf8')
        return cmdline.includes(FILESYSTEM_SERVER) && cmdline.includes(docs)
      } catch {
        return false
      }
    })
    .map(Number)
}

/** A directory the server serves, holding notes.txt. */
function docsDir(dir: string): string {
  const docs = join(dir, 'docs')
  mkdirSync(docs)
  writeFileSync(join(docs, 'notes.txt'), 'the answer is 42\n')
  return docs
}

describe('MCP servers across ACP, through the built dsh', () => {
  it("dsh run's helper on the acp provider names the user's server: its dsh acp child receives it in session/new, calls its tool, and the answer reaches the parent", async () => {
    const dir = tempDir('dsh-acp-mcp-')
    const docs = docsDir(dir)
    const home = join(dir, 'home')
    mkdirSync(join(home, 'agents'), { recursive: true })
    writeFileSync(join(home, 'agents', 'reader.md'), '---\nname: reader\ndescription: Reads the notes in a dsh acp child.\nprovider: acp\nmcpServers: [files]\n---\nYou read notes.\n')
    const sessions = join(dir, 'sessions')
    const childScript = join(dir, 'child.yml')
    writeFileSync(childScript, [
      '- reply:',
      `    - call: { tool: mcp__files__read_text_file, args: { path: ${JSON.stringify(join(docs, 'notes.txt'))} } }`,
      '    - text: "child read: {{last_tool_result}}"',
    ].join('\n'))
    const rootScript = join(dir, 'root.yml')
    writeFileSync(rootScript, [
      '- when: { depth: 0 }',
      '  reply:',
      '    - call: { tool: subagent, args: { agent: reader, description: notes, prompt: "read the notes" } }',
      '    - text: "root got: {{last_tool_result}}"',
    ].join('\n'))
    writeFileSync(join(dir, 'parent.yml'), [
      '- name: "@dsh/mcp"',
      `  config: { servers: { files: { command: ${JSON.stringify(process.execPath)}, args: [${JSON.stringify(FILESYSTEM_SERVER)}, ${JSON.stringify(docs)}] } } }`,
      '- id: subagent-acp',
      '  name: "@dsh/subagent-acp"',
      '  config:',
      '    providerName: acp',
      `    command: ${JSON.stringify(process.execPath)}`,
      `    args: ${JSON.stringify([dshBin, 'acp', '--model', `scripted:${childScript}`, '--session-dir', sessions])}`,
      // A home of its own: the parent's helpers (provider: acp) are not the child's.
      `    env: { DSH_HOME: ${JSON.stringify(join(dir, 'child-home'))} }`,
      // The child's call is decided by the broker: the root's rule, carried to the child in its lineage, allows it.
      '- id: approvals',
      '  name: "@dsh/approvals"',
      '  config: { allow: ["mcp__files__read_text_file"] }',
    ].join('\n'))
    const result = await runDsh(['run', '--config', join(dir, 'parent.yml'), '--model', `scripted:${rootScript}`, '--session-dir', sessions, '--permission', 'reject', '--quiet', 'go'], { cwd: dir, env: { DSH_HOME: home }, timeoutMs: 60_000 })
    expect(result.code, result.stderr).toBe(0)
    expect(result.stdout).toContain('root got: child read: the answer is 42')
    // The call ran in the dsh acp child's session, against the server it was sent, decided by
    // the broker (not run unasked as a read) under the root's rule, which its lineage carried.
    const childResults = sessionEvents(sessions).filter(({ child, event }) => child && event.type === 'tool/result').map(({ event }) => event)
    expect(childResults).toHaveLength(1)
    expect(childResults[0]!.result.name).toBe('mcp__files__read_text_file')
    expect(childResults[0]!.result.content.map((block: { text: string }) => block.text).join('')).toBe('the answer is 42\n')
    expect(childResults[0]!.permission).toMatchObject({ decision: 'allow-once', source: 'rule', rule: 'mcp__files__read_text_file (config)' })
    expect(serversOn(docs)).toEqual([])
  })

  it('the official SDK client sends mcpServers to dsh acp: the model\'s call reaches the server, asked of the client; one that will not start is a warning; the entry\'s value is never logged or recorded; the server goes when the client leaves', async () => {
    const dir = tempDir('dsh-acp-mcp-sdk-')
    const docs = docsDir(dir)
    const script = join(dir, 'script.yml')
    writeFileSync(script, ['- reply:', `    - call: { tool: mcp__files__read_text_file, args: { path: ${JSON.stringify(join(docs, 'notes.txt'))} } }`, '    - text: "read: {{last_tool_result}}"'].join('\n'))
    const sessions = join(dir, 'sessions')
    const served = serveTrusted(['--model', `scripted:${script}`, '--session-dir', sessions, '--verbose'], pick('allow_once'))
    const { agent } = served.connection
    const init = await agent.request(methods.agent.initialize, { protocolVersion: PROTOCOL_VERSION, clientCapabilities: {} })
    expect(init.agentCapabilities?.mcpCapabilities).toEqual({ http: true, sse: false })
    const secret = 'sk-acp-mcp-test-value'
    const session = await agent
      .buildSession(dir)
      .withMcpServer({ name: 'files', command: process.execPath, args: [FILESYSTEM_SERVER, docs], env: [{ name: 'FILES_TOKEN', value: secret }] })
      // A server that will not start: a warning, and the session goes on with the other.
      .withMcpServer({ name: 'broken', command: join(dir, 'no-such-server'), args: [], env: [{ name: 'BROKEN_TOKEN', value: secret }] })
      .start()
    expect(serversOn(docs)).toHaveLength(1)
    void session.prompt('read the notes')
    const updates: SessionUpdate[] = []
    for (;;) {
      const message = await session.nextUpdate()
      if (message.kind === 'stop') {
        expect(message.stopReason).toBe('end_turn')
        break
      }
      updates.push(message.update)
    }
    const text = updates.map((update) => (update.sessionUpdate === 'agent_message_chunk' && update.content.type === 'text' ? update.content.text : '')).join('')
    expect(text).toBe('read: the answer is 42\n')
    // read_text_file says it only reads; the client's server is not trusted to say so.
    expect(served.asked.map((request) => request.toolCall.title)).toEqual([expect.stringContaining('mcp__files__read_text_file')])
    served.child.stdin!.end()
    expect(await served.exited).toEqual({ code: 0, signal: null })
    expect(serversOn(docs)).toEqual([])
    expect(served.stderr()).toMatch(/MCP server "broken" \(the ACP client \(session\/new\)\) did not start: .*; its tools are left out/)
    expect(served.stderr()).not.toContain(secret)
    for (const name of readdirSync(sessions)) expect(readFileSync(join(sessions, name), 'utf8')).not.toContain(secret)
  })
})
