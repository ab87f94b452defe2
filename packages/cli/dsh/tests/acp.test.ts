import { spawn } from 'node:child_process'
import { existsSync, readFileSync, readdirSync, realpathSync, writeFileSync } from 'node:fs'
import { join } from 'node:path'
import { afterEach, describe, expect, it } from 'vitest'
import { methods, PROTOCOL_VERSION, type SessionUpdate } from '@agentclientprotocol/sdk'
import { killRunning, running, serveDsh } from './acp-client.js'
import { dshBin, repoRoot, runDsh, tempDir } from './cli.js'

afterEach(killRunning)

function script(dir: string, yaml: string): string {
  const file = join(dir, 'child.yml')
  writeFileSync(file, yaml)
  return file
}

function sessionFiles(dir: string): Array<Array<Record<string, unknown>>> {
  return readdirSync(dir)
    .filter((name) => name.endsWith('.jsonl'))
    .map((name) => readFileSync(join(dir, name), 'utf8').trim().split('\n').map((line) => JSON.parse(line) as Record<string, unknown>))
}

describe('dsh acp', () => {
  it('serves a scripted dsh agent: cwd honoured, chunks and tool calls streamed, stdout holds only protocol frames, EOF exits 0 with sessions flushed', async () => {
    const dir = tempDir()
    const cwd = realpathSync(tempDir('acp-cwd-'))
    const model = script(dir, [
      '- when: { prompt: "^use a tool" }',
      '  reply:',
      '    - text: "Checking."',
      '      call: { tool: no_such_tool, args: { x: 1 } }',
      '    - text: "Done."',
      '- reply:',
      '    - text: "plain answer"',
    ].join('\n'))
    // --verbose: whatever the runtime logs, at any level, must land on stderr.
    const served = serveDsh(['--model', `scripted:${model}`, '--session-dir', dir, '--verbose'])
    const { agent } = served.connection
    const init = await agent.request(methods.agent.initialize, { protocolVersion: PROTOCOL_VERSION, clientCapabilities: {} })
    expect(init.protocolVersion).toBe(1)
    const session = await agent.buildSession(cwd).start()
    void session.prompt('use a tool please')
    const updates: SessionUpdate[] = []
    let stop: string | undefined
    while (!stop) {
      const message = await session.nextUpdate()
      if (message.kind === 'stop') stop = message.stopReason
      else updates.push(message.update)
    }
    expect(stop).toBe('end_turn')
    expect(updates.map((update) => update.sessionUpdate)).toEqual(expect.arrayContaining(['agent_message_chunk', 'tool_call', 'tool_call_update']))
    expect(updates.find((update) => update.sessionUpdate === 'tool_call_update')).toMatchObject({ status: 'failed' })
    // A second session, whose MCP server does not start (no such program) makes the server log a warning: on stderr.
    const second = await agent.buildSession(cwd).withMcpServer({ name: 'files', command: 'mcp-files', args: [], env: [] }).start()
    expect(await second.prompt('hello')).toMatchObject({ stopReason: 'end_turn' })

    served.child.stdin!.end()
    expect(await served.exited).toEqual({ code: 0, signal: null })
    const lines = served.stdout().split('\n').filter((line) => line !== '')
    expect(lines.length).toBeGreaterThan(5)
    for (const line of lines) expect(JSON.parse(line)).toMatchObject({ jsonrpc: '2.0' })
    expect(served.stderr()).toContain('MCP server "files" (the ACP client (session/new)) did not start')

    const files = sessionFiles(dir)
    expect(files).toHaveLength(2)
    for (const records of files) {
      expect(records[0]).toMatchObject({ kind: 'header', header: { origin: 'acp', cwd } })
      expect(records.at(-1)).toMatchObject({ type: 'turn/end', reason: 'completed' })
    }
  })

  it('session/cancel answers cancelled; SIGTERM closes like EOF and exits 0', async () => {
    const dir = tempDir()
    const model = script(dir, '- reply:\n    - { text: "late", delay_ms: 60000 }\n')
    const served = serveDsh(['--model', `scripted:${model}`, '--session-dir', dir])
    const { agent } = served.connection
    await agent.request(methods.agent.initialize, { protocolVersion: PROTOCOL_VERSION, clientCapabilities: {} })
    const session = await agent.buildSession(dir).start()
    const answer = session.prompt('wait')
    await new Promise((resolve) => setTimeout(resolve, 200))
    await agent.notify(methods.agent.session.cancel, { sessionId: session.sessionId })
    expect(await answer).toMatchObject({ stopReason: 'cancelled' })
    served.child.kill('SIGTERM')
    expect(await served.exited).toEqual({ code: 0, signal: null })
    expect(sessionFiles(dir)[0].at(-1)).toMatchObject({ type: 'turn/end', reason: 'aborted' })
  })

  it('without a model it exits 2 saying how to pick one, and writes nothing on stdout', async () => {
    const result = await runDsh(['acp'])
    expect(result.code).toBe(2)
    expect(result.stdout).toBe('')
    expect(result.stderr).toContain('--model')
  })
})

describe('dsh run with examples/acp.yml', () => {
  it('an editor driving dsh acp sees its subagent call updated with the child\'s work before the answer, and the prompt\'s usage', async () => {
    const dir = tempDir()
    const cwd = realpathSync(tempDir('acp-cwd-'))
    const model = script(dir, [
      '- when: { depth: 1 }',
      '  reply:',
      '    - text: "Looking it up."',
      '      call: { tool: lookup_facts, args: { topic: "rivers" } }',
      '    - text: "the child is done"',
      '- when: { depth: 0 }',
      '  reply:',
      '    - call: { tool: subagent, args: { description: "facts", prompt: "find facts" } }',
      '    - text: "parent heard: {{last_tool_result}}"',
    ].join('\n'))
    const served = serveDsh(['--model', `scripted:${model}`, '--session-dir', dir])
    const { agent } = served.connection
    await agent.request(methods.agent.initialize, { protocolVersion: PROTOCOL_VERSION, clientCapabilities: {} })
    const session = await agent.buildSession(cwd).start()
    const answer = session.prompt('delegate')
    const updates: SessionUpdate[] = []
    for (;;) {
      const message = await session.nextUpdate()
      if (message.kind === 'stop') break
      updates.push(message.update)
    }
    const response = await answer
    expect(response.stopReason).toBe('end_turn')
    expect((response._meta as { dsh: { usage: { inputTokens: number; outputTokens: number } } }).dsh.usage.inputTokens).toBeGreaterThan(0)
    const call = updates.find((update) => update.sessionUpdate === 'tool_call' && update.title === 'subagent') as { toolCallId: string }
    const onCall = updates.filter((update): update is Extract<SessionUpdate, { sessionUpdate: 'tool_call_update' }> => update.sessionUpdate === 'tool_call_update' && update.toolCallId === call.toolCallId)
    const final = onCall.findIndex((update) => update.status === 'completed')
    expect(final).toBe(onCall.length - 1)
    const shown = onCall.slice(0, final).flatMap((update) => (update.content ?? []).map((block) => (block.type === 'content' && block.content.type === 'text' ? block.content.text : '')))
    expect(shown).toContain('↳ [facts] writing…')
    expect(shown).toContain('↳ [facts] lookup_facts: rivers')
    expect(shown.some((line) => line.startsWith('↳ [facts] lookup_facts failed: '))).toBe(true)
    served.child.stdin!.end()
    expect(await served.exited).toEqual({ code: 0, signal: null })
  })

  it('a scripted parent delegating through subagent_acp to `dsh acp` prints the child\'s answer', async () => {
    const dir = tempDir()
    const home = tempDir('dsh-home-')
    const result = await runDsh(
      ['run', '--config', 'examples/acp.yml', '--model', 'scripted:examples/acp-parent.yml', '--session-dir', dir, 'ask the ACP child about France'],
      { env: { DSH_HOME: home } },
    )
    expect(result.stdout).toContain('The ACP child answered: Paris is the capital of France.')
    expect(result.code).toBe(0)
    // The child ran in its own process and persisted its own ordinary session, beside its parent's.
    const child = sessionFiles(dir).find((lines) => (lines[0] as { header?: { origin?: string } }).header?.origin === 'acp')
    expect(child?.[0]).toMatchObject({ kind: 'header', header: { origin: 'acp', cwd: repoRoot } })
    expect(existsSync(join(home, 'sessions'))).toBe(false)
  })

  it('the ACP child\'s session is linked to its parent, so dsh sessions tree shows it across the process boundary', async () => {
    const home = tempDir('dsh-home-')
    const result = await runDsh(['run', '--quiet', '--config', 'examples/acp.yml', '--model', 'scripted:examples/acp-parent.yml', 'ask the ACP child about France'], { env: { DSH_HOME: home } })
    expect(result.code).toBe(0)
    const tree = await runDsh(['sessions', 'tree'], { env: { DSH_HOME: home } })
    const lines = tree.stdout.trim().split('\n')
    expect(lines).toHaveLength(2)
    expect(lines[0]).toMatch(/ {2}cli "ask the ACP child about France" {2}completed$/)
    expect(lines[1]).toMatch(/^└─ \S+ {2}acp "ask about France" {2}completed$/)
  })
})

describe('dsh run interrupted while an ACP child works', () => {
  it('SIGINT exits only after the ACP child process is gone', async () => {
    const dir = tempDir()
    const childScript = script(dir, '- reply: [{ text: "too slow", delay_ms: 60000 }]\n')
    const parentScript = join(dir, 'parent.yml')
    writeFileSync(parentScript, '- when: { depth: 0 }\n  reply:\n    - call: { tool: subagent_acp, args: { description: "slow child", prompt: "work slowly" } }\n    - text: "never"\n')
    const config = join(dir, 'acp.yml')
    writeFileSync(config, [
      '- id: subagent-acp',
      '  name: "@dsh/subagent-acp"',
      `  config: { command: ${JSON.stringify(process.execPath)}, args: [${JSON.stringify(dshBin)}, acp, --model, "scripted:${childScript}"] }`,
      '- id: tool-subagent-acp',
      '  name: "@dsh/tool-subagent"',
      '  config: { provider: acp, toolName: subagent_acp }',
    ].join('\n'))
    const run = spawn(process.execPath, [dshBin, 'run', '--config', config, '--model', `scripted:${parentScript}`, '--session-dir', dir, 'go'], {
      cwd: repoRoot,
      env: { ...process.env, DSH_HOME: dir },
      stdio: ['ignore', 'pipe', 'pipe'],
    })
    running.push(run)
    let stderr = ''
    run.stderr!.on('data', (chunk: Buffer) => (stderr += chunk))
    const exited = new Promise<number | null>((resolve) => run.on('close', (code) => resolve(code)))
    // the child announces itself once its ACP session exists
    const deadline = Date.now() + 20_000
    while (!stderr.includes('[subagent] start acp')) {
      if (Date.now() > deadline) throw new Error(`the ACP child never started:\n${stderr}`)
      await new Promise((resolve) => setTimeout(resolve, 50))
    }
    const childPids = processesRunning(childScript)
    expect(childPids.length).toBeGreaterThan(0)
    run.kill('SIGINT')
    const code = await exited
    expect(code).toBe(130)
    expect(stderr).toMatch(/\[subagent\] end acp \S+ aborted/)
    for (const pid of childPids) expect(alive(pid)).toBe(false)
  })
})

/** Pids whose command line mentions `marker`. */
function processesRunning(marker: string): number[] {
  return readdirSync('/proc')
    .filter((entry) => /^\d+$/.test(entry))
    .filter((pid) => {
      try {
        return readFileSync(`/proc/${pid}/cmdline`, 'utf8').includes(marker)
      } catch {
        return false
      }
    })
    .map(Number)
}

function alive(pid: number): boolean {
  try {
    // a zombie is dead for our purposes: nothing reaps orphans on these machines
    return !/\) Z /.test(readFileSync(`/proc/${pid}/stat`, 'utf8'))
  } catch {
    return false
  }
}
