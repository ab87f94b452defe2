/**
 * `dsh acp` runs its sessions' commands through its client's terminal when the client
 * offers one: the bash tool's command goes out as `terminal/create { command: bash, args:
 * [-c, command], cwd }` after the client was asked permission, its output and exit come
 * back as the tool result, and the terminal is released; a refused create runs nothing
 * anywhere; a timeout or a cancelled prompt kills it on the client. A client that offers
 * no terminal has its commands run here, as before. The test's client is a real SDK client
 * app whose terminals are real processes.
 */
import { spawn, type ChildProcess } from 'node:child_process'
import { existsSync, mkdtempSync, realpathSync, writeFileSync } from 'node:fs'
import { tmpdir } from 'node:os'
import { join } from 'node:path'
import { afterEach, describe, expect, it } from 'vitest'
import { client, methods, PROTOCOL_VERSION, RequestError, type ClientCapabilities, type ClientConnection, type CreateTerminalRequest, type SessionUpdate, type Stream } from '@agentclientprotocol/sdk'
import { ApprovalService } from '@dsh/approvals'
import { BashService } from '@dsh/bash'
import { BashToolPlugin } from '@dsh/tool-bash'
import { createHarness, type Harness, type HarnessOptions } from '@dsh/testkit/harness'
import { clientTerminalRouter, serveAcp } from '@dsh/acp-server'

let harness: Harness | undefined
let connection: ClientConnection | undefined
let editor: EditorTerminals | undefined
afterEach(async () => {
  connection?.close()
  await harness?.dispose()
  editor?.killAll()
  harness = undefined
  connection = undefined
  editor = undefined
})

/** An editor's terminals: real processes, their output kept whole; every request logged. */
class EditorTerminals {
  readonly log: string[] = []
  readonly created: CreateTerminalRequest[] = []
  refuse: string | undefined
  /** A client that never confirms a kill: kill does nothing, and wait_for_exit never answers. */
  unresponsive = false
  private readonly terminals = new Map<string, { child: ChildProcess; output: string; exit?: { exitCode: number | null; signal: string | null }; exited: Promise<void> }>()
  private next = 0

  create(params: CreateTerminalRequest): { terminalId: string } {
    this.log.push('terminal/create')
    this.created.push(params)
    if (this.refuse !== undefined) throw new RequestError(-32003, this.refuse)
    const child = spawn(params.command, params.args ?? [], { cwd: params.cwd ?? undefined, env: { ...process.env, EDITOR_TERMINAL: 'yes' }, stdio: ['ignore', 'pipe', 'pipe'] })
    const terminal = { child, output: '', exit: undefined as { exitCode: number | null; signal: string | null } | undefined, exited: Promise.resolve() }
    for (const stream of [child.stdout!, child.stderr!]) stream.on('data', (chunk: Buffer) => (terminal.output += chunk.toString('utf8')))
    terminal.exited = new Promise((resolve) => child.on('close', (exitCode, signal) => resolve(void (terminal.exit = { exitCode, signal }))))
    const terminalId = `editor-${++this.next}`
    this.terminals.set(terminalId, terminal)
    return { terminalId }
  }

  async waitForExit(terminalId: string) {
    this.log.push('terminal/wait_for_exit')
    const terminal = this.get(terminalId)
    if (this.unresponsive) await new Promise(() => {})
    await terminal.exited
    return terminal.exit!
  }

  output(terminalId: string) {
    this.log.push('terminal/output')
    const terminal = this.get(terminalId)
    return { output: terminal.output, truncated: false, ...(terminal.exit && { exitStatus: terminal.exit }) }
  }

  kill(terminalId: string) {
    this.log.push('terminal/kill')
    if (!this.unresponsive) this.get(terminalId).child.kill('SIGTERM')
    return {}
  }

  release(terminalId: string) {
    this.log.push('terminal/release')
    this.get(terminalId).child.kill('SIGTERM')
    this.terminals.delete(terminalId)
    return {}
  }

  get open(): number {
    return this.terminals.size
  }

  pids(): number[] {
    return [...this.terminals.values()].map((terminal) => terminal.child.pid!)
  }

  killAll(): void {
    for (const terminal of this.terminals.values()) terminal.child.kill('SIGKILL')
  }

  private get(terminalId: string) {
    const terminal = this.terminals.get(terminalId)
    if (!terminal) throw RequestError.resourceNotFound(terminalId)
    return terminal
  }
}

/** A harness with the bash tool served to an SDK client that offers (or not) its terminal, answering permission requests with allow once. */
async function serve(script: HarnessOptions['script'], capabilities: ClientCapabilities) {
  harness = await createHarness({ script })
  await harness.plugin(ApprovalService)
  await harness.plugin(BashService)
  await harness.plugin(BashToolPlugin)
  const terminals = new EditorTerminals()
  editor = terminals
  const toServer = new TransformStream()
  const toClient = new TransformStream()
  serveAcp(harness.ctx, { readable: toServer.readable, writable: toClient.writable } as Stream, { permission: 'ask' })
  connection = client({ name: 'test-editor' })
    .onRequest(methods.client.session.requestPermission, ({ params }) => {
      terminals.log.push(`session/request_permission ${params.toolCall.title}`)
      return { outcome: { outcome: 'selected', optionId: params.options.find((option) => option.kind === 'allow_once')!.optionId } }
    })
    .onRequest(methods.client.terminal.create, ({ params }) => terminals.create(params))
    .onRequest(methods.client.terminal.waitForExit, ({ params }) => terminals.waitForExit(params.terminalId))
    .onRequest(methods.client.terminal.output, ({ params }) => terminals.output(params.terminalId))
    .onRequest(methods.client.terminal.kill, ({ params }) => terminals.kill(params.terminalId))
    .onRequest(methods.client.terminal.release, ({ params }) => terminals.release(params.terminalId))
    .connect({ readable: toClient.readable, writable: toServer.writable } as Stream)
  await connection.agent.request(methods.agent.initialize, { protocolVersion: PROTOCOL_VERSION, clientCapabilities: capabilities })
  const cwd = realpathSync(mkdtempSync(join(tmpdir(), 'acp-client-terminal-')))
  const session = await connection.agent.buildSession(cwd).start()
  return { terminals, session, cwd }
}

/** One prompt's updates and stop reason. */
async function prompt(session: Awaited<ReturnType<typeof serve>>['session'], text: string, onUpdate?: (update: SessionUpdate) => void) {
  void session.prompt(text).catch(() => {})
  const updates: SessionUpdate[] = []
  for (;;) {
    const message = await session.nextUpdate()
    if (message.kind === 'stop') return { updates, stopReason: message.stopReason }
    updates.push(message.update)
    onUpdate?.(message.update)
  }
}

/** The text of the bash tool call's result, as the client saw it. */
function toolResult(updates: SessionUpdate[]): string {
  const update = updates.find((candidate) => candidate.sessionUpdate === 'tool_call_update' && candidate.status !== undefined)
  if (update?.sessionUpdate !== 'tool_call_update') throw new Error('no tool result')
  return (update.content ?? []).map((block) => (block.type === 'content' && block.content.type === 'text' ? block.content.text : '')).join('')
}

const bashCall = (command: string, extra: Record<string, unknown> = {}): NonNullable<HarnessOptions['script']> => [{ reply: [{ call: { tool: 'bash', args: { command, ...extra } } }, { text: 'done' }] }]

describe('dsh acp: commands through the client\'s terminal', () => {
  it('a session\'s bash command runs on the client (bash -c, in the session\'s cwd) after the client was asked, and its output and exit are the tool result; the terminal is released', async () => {
    const command = 'echo "editor=$EDITOR_TERMINAL cwd=$(pwd)"; exit 3'
    const { terminals, session, cwd } = await serve(bashCall(command), { terminal: true })
    const { updates, stopReason } = await prompt(session, 'go')
    expect(stopReason).toBe('end_turn')
    expect(terminals.created).toEqual([{ sessionId: session.sessionId, command: 'bash', args: ['-c', command], cwd, outputByteLimit: expect.any(Number) }])
    expect(toolResult(updates)).toBe(`exit code 3\neditor=yes cwd=${cwd}\n`)
    expect(terminals.log).toEqual([`session/request_permission bash ${command}`, 'terminal/create', 'terminal/wait_for_exit', 'terminal/output', 'terminal/release'])
    expect(terminals.open).toBe(0)
  })

  it('a terminal the client refuses runs nothing, here or there, and the tool result says why', async () => {
    const { terminals, session, cwd } = await serve(bashCall('touch made-here'), { terminal: true })
    terminals.refuse = 'not in this editor'
    const { updates } = await prompt(session, 'go')
    expect(toolResult(updates)).toBe('the command could not be started: the ACP client did not run it: not in this editor\n(no output)')
    expect(existsSync(join(cwd, 'made-here'))).toBe(false)
    expect(terminals.open).toBe(0)
  })

  it('a timeout kills the command on the client', async () => {
    const { terminals, session } = await serve(bashCall('sleep 30', { timeout_ms: 300 }), { terminal: true })
    const { updates } = await prompt(session, 'go')
    expect(toolResult(updates)).toMatch(/^timed out after 300ms/)
    expect(terminals.log).toContain('terminal/kill')
    expect(terminals.open).toBe(0)
  })

  it('a client that never confirms a kill holds the call no longer than the grace period, and the result says the command may still run there', async () => {
    const { terminals, session } = await serve(bashCall('sleep 30', { timeout_ms: 200 }), { terminal: true })
    terminals.unresponsive = true
    const { updates, stopReason } = await prompt(session, 'go')
    expect(stopReason).toBe('end_turn')
    expect(toolResult(updates)).toMatch(/^timed out after 200ms; .*\n\[the ACP client did not confirm that the command ended within 5000 ms of terminal\/kill; it may still be running there\]/s)
    expect(terminals.log).toEqual(expect.arrayContaining(['terminal/kill', 'terminal/release']))
  })

  it('cancelling the prompt kills the command on the client, and the prompt answers cancelled', async () => {
    const { terminals, session } = await serve(bashCall('sleep 30'), { terminal: true })
    const { stopReason } = await prompt(session, 'go', (update) => {
      if (update.sessionUpdate === 'tool_call') {
        // Once the command runs on the client, the user cancels.
        const check = setInterval(() => {
          if (terminals.created.length === 0) return
          clearInterval(check)
          void connection!.agent.notify(methods.agent.session.cancel, { sessionId: session.sessionId })
        }, 10)
      }
    })
    expect(stopReason).toBe('cancelled')
    expect(terminals.log).toContain('terminal/kill')
  })

  it('a reader following a running command (a background task) sees its output before it ends, fetched from the client, then all of it', async () => {
    const { terminals, session, cwd } = await serve([{ reply: [{ text: 'unused' }] }], { terminal: true })
    // The command waits for the test, which waits until the reader has seen its first line.
    const running = harness!.ctx.bash.start({ command: 'echo first; while [ ! -e go ]; do sleep 0.05; done; echo second', cwd, agentId: session.sessionId })
    let seen = ''
    while (!seen.includes('first\n')) {
      seen += running.read(seen.length).text
      await new Promise((resolve) => setTimeout(resolve, 50))
    }
    expect(terminals.log).toContain('terminal/output')
    writeFileSync(join(cwd, 'go'), '')
    const exit = await running.exited
    expect(exit).toMatchObject({ exitCode: 0, stopped: false })
    expect(running.output()).toBe('first\nsecond\n')
    expect(terminals.open).toBe(0)
  })

  it('a client that offers no terminal has its commands run here, as before', async () => {
    const { terminals, session, cwd } = await serve(bashCall('echo "editor=${EDITOR_TERMINAL:-no}" > made-here'), {})
    await prompt(session, 'go')
    expect(terminals.created).toEqual([])
    expect(existsSync(join(cwd, 'made-here'))).toBe(true)
  })
})

describe('clientTerminalRouter', () => {
  it('routes only a session\'s agents\' unconfined commands in its directory, and only while the client offers a terminal', () => {
    let capabilities: ClientCapabilities | undefined = { terminal: true }
    const { route } = clientTerminalRouter({
      client: {} as never,
      capabilities: () => capabilities,
      sessionOf: (agentId) => (agentId === 'session-agent' || agentId === 'its-child' ? { id: 'session-agent' } : undefined),
      cwdOf: () => '/work/tree',
    })
    const request = { command: 'ls', cwd: '/work/tree/src', agentId: 'its-child' }
    expect(route(request)?.name).toBe('acp-client-terminal')
    expect(route({ ...request, agentId: 'session-agent', cwd: '/work/tree' })).toBe(route(request))
    expect(route({ ...request, agentId: undefined })).toBeUndefined()
    expect(route({ ...request, agentId: 'stranger' })).toBeUndefined()
    expect(route({ ...request, cwd: '/work/tree-worktree' })).toBeUndefined()
    expect(route({ ...request, cwd: '/work' })).toBeUndefined()
    expect(route({ ...request, sandbox: { writable: ['/work/tree'], network: false } })).toBeUndefined()
    capabilities = { terminal: false }
    expect(route(request)).toBeUndefined()
  })
})
