/**
 * `dsh acp` runs no side-effecting tool the client has not allowed: it asks with
 * `session/request_permission` (or applies `--permission allow|reject`), and the decision
 * is recorded with the call's result in the session file.
 */
import { existsSync, readFileSync, realpathSync, writeFileSync } from 'node:fs'
import { join } from 'node:path'
import { afterEach, describe, expect, it } from 'vitest'
import { methods, PROTOCOL_VERSION, type SessionUpdate } from '@agentclientprotocol/sdk'
import { killTrustRunning, pick, serveTrusted, type PermissionAnswer } from './acp-trust-client.js'
import { runDsh, tempDir } from './cli.js'

afterEach(killTrustRunning)

interface Setup {
  dir: string
  marker: (name: string) => string
}

/**
 * A model that runs two commands in the ACP session and one in an in-process child it
 * delegates to; with `sameCommand`, all three run one and the same command.
 */
function setup(sameCommand = false): Setup & { model: string } {
  const dir = realpathSync(tempDir())
  const marker = (name: string) => join(dir, name)
  const model = join(dir, 'model.yml')
  const command = (name: string) => (sameCommand ? `touch ${marker('same-ran')}` : `touch ${marker(name)}`)
  writeFileSync(model, [
    '- when: { depth: 1 }',
    '  reply:',
    `    - call: { tool: bash, args: { command: "${command('child-ran')}" } }`,
    '    - text: "child: {{tool_results}}"',
    '- when: { depth: 0 }',
    '  reply:',
    `    - call: { tool: bash, args: { command: "${command('first-ran')}" } }`,
    `    - call: { tool: bash, args: { command: "${command('second-ran')}" } }`,
    '    - call: { tool: subagent, args: { description: "helper", prompt: "run a command" } }',
    '    - text: "done: {{tool_results}}"',
  ].join('\n'))
  return { dir, marker, model }
}

async function promptOnce(args: string[], answer?: PermissionAnswer, sameCommand = false) {
  const { dir, marker, model } = setup(sameCommand)
  const served = serveTrusted(['--model', `scripted:${model}`, '--session-dir', dir, ...args], answer)
  const { agent } = served.connection
  await agent.request(methods.agent.initialize, { protocolVersion: PROTOCOL_VERSION, clientCapabilities: {} })
  const session = await agent.buildSession(dir).start()
  void session.prompt('run the commands')
  const updates: SessionUpdate[] = []
  let stop: string | undefined
  while (!stop) {
    const message = await session.nextUpdate()
    if (message.kind === 'stop') stop = message.stopReason
    else updates.push(message.update)
  }
  served.child.stdin!.end()
  const exited = await served.exited
  const lines = readFileSync(join(dir, `${session.sessionId}.jsonl`), 'utf8').trim().split('\n').map((line) => JSON.parse(line) as { type?: string; permission?: unknown })
  const decisions = lines.filter((line) => line.type === 'tool/result' && line.permission !== undefined).map((line) => line.permission)
  return { dir, marker, served, stop, updates, exited, decisions, sessionId: session.sessionId }
}

describe('dsh acp permissions', () => {
  it('a client that rejects every permission cannot make dsh acp run a command, in its session or in a child it delegates to', async () => {
    const { marker, served, stop, updates, exited, decisions, dir, sessionId } = await promptOnce([], pick('reject_once'))
    expect(stop).toBe('end_turn')
    for (const name of ['first-ran', 'second-ran', 'child-ran']) expect(existsSync(marker(name))).toBe(false)
    // Asked for each of the three calls, naming the session the call belongs to and, for
    // the child's, the child: in the title for any editor, and in _meta.dsh for a dsh parent.
    expect(served.asked).toHaveLength(3)
    expect(served.asked.every((request) => request.sessionId === sessionId)).toBe(true)
    expect(served.asked.map((request) => request.toolCall.title)).toEqual([`bash touch ${marker('first-ran')}`, `bash touch ${marker('second-ran')}`, `spawn "helper": bash touch ${marker('child-ran')}`])
    expect(served.asked.map((request) => (request._meta as { dsh: { approval: { below: string[] } } }).dsh.approval.below)).toEqual([[], [], ['spawn "helper"']])
    expect(served.asked[0].toolCall.kind).toBe('execute')
    expect(served.asked[0].options.map((option) => option.kind)).toEqual(['allow_once', 'allow_always', 'reject_once'])
    // The model sees the refusal as the call's error result.
    const failed = updates.filter((update) => update.sessionUpdate === 'tool_call_update' && update.status === 'failed')
    expect(failed.length).toBeGreaterThanOrEqual(2)
    expect(JSON.stringify(failed)).toContain('permission denied by the ACP client')
    // Recorded durably with each result, and the file still reads back.
    expect(decisions).toEqual([
      { decision: 'reject', by: 'the ACP client', reason: 'the user rejected it', source: 'user', at: expect.any(Number) },
      { decision: 'reject', by: 'the ACP client', reason: 'the user rejected it', source: 'user', at: expect.any(Number) },
    ])
    expect(exited.code).toBe(0)
    const shown = await runDsh(['sessions', 'show', sessionId, '--session-dir', dir])
    expect(shown.code).toBe(0)
  })

  it('allow always is asked once per request and session tree; the same request later runs without asking, another one is asked', async () => {
    const same = await promptOnce([], pick('allow_always'), true)
    expect(existsSync(same.marker('same-ran'))).toBe(true)
    // The child belongs to the same ACP session's tree, so its identical call is covered too.
    expect(same.served.asked).toHaveLength(1)
    expect(same.decisions).toEqual([
      { decision: 'allow-always', by: 'the ACP client', source: 'user', at: expect.any(Number) },
      { decision: 'allow-always', by: 'an earlier answer in this tree', source: 'remembered', at: expect.any(Number) },
    ])
    const different = await promptOnce([], pick('allow_always'))
    for (const name of ['first-ran', 'second-ran', 'child-ran']) expect(existsSync(different.marker(name))).toBe(true)
    expect(different.served.asked).toHaveLength(3)
  })

  it('allow once runs that call only: each later call is asked again', async () => {
    const { marker, served } = await promptOnce([], pick('allow_once'))
    expect(existsSync(marker('first-ran'))).toBe(true)
    expect(existsSync(marker('child-ran'))).toBe(true)
    expect(served.asked).toHaveLength(3)
  })

  it('--permission reject refuses every command without asking; --permission allow runs them without asking', async () => {
    const rejected = await promptOnce(['--permission', 'reject'], pick('allow_always'))
    expect(rejected.served.asked).toHaveLength(0)
    for (const name of ['first-ran', 'second-ran', 'child-ran']) expect(existsSync(rejected.marker(name))).toBe(false)
    expect(rejected.decisions[0]).toMatchObject({ decision: 'reject', by: 'dsh acp --permission reject', source: 'default' })

    const allowed = await promptOnce(['--permission', 'allow'], pick('reject_once'))
    expect(allowed.served.asked).toHaveLength(0)
    for (const name of ['first-ran', 'second-ran', 'child-ran']) expect(existsSync(allowed.marker(name))).toBe(true)
    expect(allowed.decisions[0]).toEqual({ decision: 'allow-once', by: 'dsh acp --permission allow', source: 'default', at: expect.any(Number) })
  })

  it('a client that cannot answer permission requests gets no command run', async () => {
    const { marker, decisions } = await promptOnce([], () => {
      throw new Error('this client has no permission UI')
    })
    for (const name of ['first-ran', 'second-ran', 'child-ran']) expect(existsSync(marker(name))).toBe(false)
    expect(decisions[0]).toMatchObject({ decision: 'reject', by: 'dsh acp', reason: expect.stringContaining('asking the client failed') })
  })

  it('an unknown --permission is a usage error, exit 2', async () => {
    const result = await runDsh(['acp', '--model', 'scripted:x', '--permission', 'sometimes'])
    expect(result.code).toBe(2)
    expect(result.stderr.trim()).toBe('dsh acp: --permission must be one of ask, allow, reject (got "sometimes")')
  })
})
