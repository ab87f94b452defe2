/**
 * Every side effect in the tree is asked once, at the root: a `dsh run` on a terminal
 * (tmux), or an ACP client driving `dsh acp`, is asked for its spawn child's command and
 * for the commands of an ACP child (`dsh acp`, its own process) and of that child's own
 * spawn child, each prompt naming the agent path; a rejected command is not run, and an
 * "always" answer lets the identical request through without another prompt.
 */
import { existsSync, mkdirSync, readFileSync, readdirSync, rmSync, writeFileSync } from 'node:fs'
import { join } from 'node:path'
import { afterAll, afterEach, describe, expect, it } from 'vitest'
import { tmuxServer } from './tmux.js'
import { methods, PROTOCOL_VERSION, type RequestPermissionRequest, type RequestPermissionResponse } from '@agentclientprotocol/sdk'
import { killTrustRunning, serveTrusted } from './acp-trust-client.js'
import { dshBin, runDsh, tempDir } from './cli.js'

const session = `dsh-approvals-tree-${process.pid}`
const { tmux, stop: stopTmux } = tmuxServer(session)
afterAll(stopTmux)
const screen = () => tmux('capture-pane', '-p', '-J', '-t', session)

async function until(check: (text: string) => boolean, timeoutMs = 20_000): Promise<string> {
  const deadline = Date.now() + timeoutMs
  let text = ''
  while (Date.now() < deadline) {
    text = screen()
    if (check(text)) return text
    await new Promise((resolve) => setTimeout(resolve, 50))
  }
  throw new Error(`the screen never matched; last screen:\n${text}`)
}

afterEach(() => {
  killTrustRunning()
  try {
    tmux('kill-session', '-t', session)
  } catch {
    // already gone
  }
})

/**
 * One script for every agent of the tree: the root delegates at once to a spawn child and
 * an ACP child; the spawn child runs one command; the ACP child runs one and delegates to
 * a spawn grandchild, which runs one command twice.
 */
function tree(dir: string): { script: string; config: string } {
  const script = join(dir, 'script.yml')
  writeFileSync(script, [
    '- when: { prompt: "spawn work" }',
    '  reply:',
    '    - call: { tool: bash, args: { command: "touch spawn-ran" } }',
    '    - text: "spawn child: {{last_tool_result}}"',
    '- when: { prompt: "acp work" }',
    '  reply:',
    '    - call: { tool: bash, args: { command: "touch acp-ran" } }',
    '    - call: { tool: subagent, args: { description: "grand", prompt: "grand work" } }',
    '    - text: "acp child: {{last_tool_result}}"',
    '- when: { prompt: "grand work" }',
    '  reply:',
    '    - call: { tool: bash, args: { command: "touch grand-ran" } }',
    '    - call: { tool: bash, args: { command: "touch grand-ran" } }',
    '    - text: "grand: {{last_tool_result}}"',
    '- when: { depth: 0 }',
    '  reply:',
    '    - calls:',
    '        - { tool: subagent, args: { description: "spawn child", prompt: "spawn work" } }',
    '        - { tool: subagent_acp, args: { description: "acp child", prompt: "acp work" } }',
    '    - text: "root finished"',
  ].join('\n'))
  const config = join(dir, 'dsh.yml')
  writeFileSync(config, [
    '- id: subagent-acp',
    '  name: "@dsh/subagent-acp"',
    '  config:',
    '    providerName: acp',
    `    command: ${JSON.stringify(process.execPath)}`,
    // The child names its config: a dsh.yml it merely finds in its directory is a project file it would refuse.
    `    args: [${JSON.stringify(dshBin)}, acp, --config, ${JSON.stringify(config)}, --model, ${JSON.stringify(`scripted:${script}`)}]`,
    '- id: tool-subagent-acp',
    '  name: "@dsh/tool-subagent"',
    '  config: { provider: acp, toolName: subagent_acp }',
  ].join('\n'))
  return { script, config }
}

/** Every event of every session file in `dir`, with its session's header. */
function sessionsOf(dir: string): Array<{ header: Record<string, unknown>; events: Array<Record<string, unknown>> }> {
  return readdirSync(dir)
    .filter((name) => name.endsWith('.jsonl'))
    .map((name) => {
      const [head, ...rest] = readFileSync(join(dir, name), 'utf8').trim().split('\n').map((line) => JSON.parse(line) as Record<string, unknown>)
      return { header: head!.header as Record<string, unknown>, events: rest }
    })
}

/** The permission decisions recorded with tool results, by command. */
function decisions(dir: string): Array<{ command: string; permission: Record<string, unknown> }> {
  const found: Array<{ command: string; permission: Record<string, unknown> }> = []
  for (const { events } of sessionsOf(dir)) {
    const commands = new Map<string, string>()
    for (const event of events) {
      if (event.type === 'tool/call') {
        const call = event.call as { id: string; args?: { command?: string } }
        if (call.args?.command) commands.set(call.id, call.args.command)
      }
      if (event.type === 'tool/result' && event.permission) {
        const command = commands.get((event.result as { callId: string }).callId)
        if (command) found.push({ command, permission: event.permission as Record<string, unknown> })
      }
    }
  }
  return found
}

describe('one approval broker for the whole tree', () => {
  it('dsh run on a terminal asks for every command in the tree, naming its agent path; a rejected one is not run; "always" covers the identical request below an ACP child', async () => {
    const dir = tempDir()
    const { script, config } = tree(dir)
    const command = [process.execPath, dshBin, 'run', '--config', config, '--model', `scripted:${script}`, '--session-dir', dir, 'go'].map((part) => `'${part}'`).join(' ')
    tmux('new-session', '-d', '-s', session, '-x', '200', '-y', '50', `cd ${dir} && env DSH_HOME=${dir} ${command}; echo EXIT=$?; sleep 30`)

    const asked: string[] = []
    const answers: Record<string, string> = { 'touch spawn-ran': 'n', 'touch acp-ran': 'y', 'touch grand-ran': 'a' }
    // The prompt on screen: a question not yet followed by its answer (`→ rejected`).
    const openQuestion = (text: string) => text.split('\n').filter((line) => line.includes(' wants to run bash: ') && !line.includes(' → ')).at(-1)
    while (asked.length < 3) {
      const text = await until((shown) => (openQuestion(shown) !== undefined && shown.includes('[y] allow once')) || shown.includes('EXIT='))
      if (text.includes('EXIT=')) break
      const question = openQuestion(text)!.trim()
      const subject = Object.keys(answers).find((candidate) => question.endsWith(candidate))
      if (subject === undefined) throw new Error(`an unexpected question: ${question}`)
      asked.push(question)
      await new Promise((resolve) => setTimeout(resolve, 200)) // a person reads the prompt before answering: keys typed sooner are ignored
      tmux('send-keys', '-t', session, answers[subject]!)
      await until((shown) => shown.includes(`${subject} → `))
    }
    const done = await until((text) => text.includes('EXIT='))
    expect(done).toContain('EXIT=0')
    expect(asked.sort()).toEqual([
      'dsh › acp "acp child" wants to run bash: touch acp-ran',
      'dsh › acp "acp child" › spawn "grand" wants to run bash: touch grand-ran',
      'dsh › spawn "spawn child" wants to run bash: touch spawn-ran',
    ])
    expect(existsSync(join(dir, 'spawn-ran'))).toBe(false)
    expect(existsSync(join(dir, 'acp-ran'))).toBe(true)
    expect(existsSync(join(dir, 'grand-ran'))).toBe(true)
    // Each decision is in the session of the agent that asked, saying who decided: the
    // grandchild's (in the dsh acp child's process) came from the user at the root.
    const recorded = decisions(dir)
    expect(recorded.find((entry) => entry.command === 'touch spawn-ran')?.permission).toMatchObject({ decision: 'reject', by: 'the user at the terminal', source: 'user' })
    expect(recorded.filter((entry) => entry.command === 'touch grand-ran').map((entry) => entry.permission)).toEqual([
      { decision: 'allow-always', by: 'the user at the terminal (through the ACP client)', source: 'user', at: expect.any(Number) },
      { decision: 'allow-always', by: 'an earlier answer in this tree', source: 'remembered', at: expect.any(Number) },
    ])
  })

  it('the same through the SDK client driving dsh acp: every request reaches the client naming the child below the session, and its answers hold', async () => {
    const dir = tempDir()
    const { script, config } = tree(dir)
    const answered: Array<{ title: string; below: unknown }> = []
    const answer = (request: RequestPermissionRequest): RequestPermissionResponse => {
      const title = request.toolCall.title ?? ''
      answered.push({ title, below: (request._meta as { dsh?: { approval?: { below?: unknown } } } | undefined)?.dsh?.approval?.below })
      const kind = title.endsWith('touch spawn-ran') ? 'reject_once' : title.endsWith('touch grand-ran') ? 'allow_always' : 'allow_once'
      const option = request.options.find((candidate) => candidate.kind === kind)!
      return { outcome: { outcome: 'selected', optionId: option.optionId } }
    }
    const served = serveTrusted(['--config', config, '--model', `scripted:${script}`, '--session-dir', dir], answer)
    const { agent } = served.connection
    await agent.request(methods.agent.initialize, { protocolVersion: PROTOCOL_VERSION, clientCapabilities: {} })
    const acpSession = await agent.buildSession(dir).start()
    void acpSession.prompt('go')
    let stop: string | undefined
    while (!stop) {
      const message = await acpSession.nextUpdate()
      if (message.kind === 'stop') stop = message.stopReason
    }
    served.child.stdin!.end()
    await served.exited
    expect(stop).toBe('end_turn')
    expect(answered.map((entry) => entry.title).sort()).toEqual([
      'acp "acp child" › spawn "grand": bash touch grand-ran',
      'acp "acp child": bash touch acp-ran',
      'spawn "spawn child": bash touch spawn-ran',
    ])
    expect(answered.find((entry) => entry.title.endsWith('grand-ran'))?.below).toEqual(['acp "acp child"', 'spawn "grand"'])
    expect(existsSync(join(dir, 'spawn-ran'))).toBe(false)
    expect(existsSync(join(dir, 'acp-ran'))).toBe(true)
    expect(existsSync(join(dir, 'grand-ran'))).toBe(true)
  })

  it('a helper whose rules allow only "touch tested*" runs that unasked and is refused anything else; under a config that denies bash, the same helper is refused it too', async () => {
    const dir = tempDir()
    // The user's own helper (DSH_HOME is dir): a project's file would not get its allow.
    mkdirSync(join(dir, 'agents'), { recursive: true })
    writeFileSync(join(dir, 'agents', 'tester.md'), ['---', 'name: tester', 'description: Runs the tests.', 'permissions:', '  allow: ["bash(touch tested*)"]', '---', 'You run the tests.', ''].join('\n'))
    const script = join(dir, 'script.yml')
    writeFileSync(script, [
      '- when: { prompt: "run the tests" }',
      '  reply:',
      '    - call: { tool: bash, args: { command: "touch tested" } }',
      '    - call: { tool: bash, args: { command: "touch other" } }',
      '    - text: "tester: {{tool_results}}"',
      '- when: { depth: 0 }',
      '  reply:',
      '    - call: { tool: subagent, args: { agent: tester, description: test, prompt: "run the tests" } }',
      '    - text: "root: {{last_tool_result}}"',
    ].join('\n'))
    const run = (extra: string[]) => runDsh(['run', '--model', `scripted:${script}`, '--session-dir', join(dir, 'sessions'), ...extra, 'go'], { cwd: dir, env: { DSH_HOME: dir } })
    mkdirSync(join(dir, 'sessions'))
    // Nobody to ask (not a terminal): the helper's rule decides what it allows, the default the rest.
    const first = await run([])
    expect(first.code).toBe(0)
    expect(existsSync(join(dir, 'tested'))).toBe(true)
    expect(existsSync(join(dir, 'other'))).toBe(false)
    const recorded = decisions(join(dir, 'sessions'))
    expect(recorded.find((entry) => entry.command === 'touch tested')?.permission).toMatchObject({ decision: 'allow-once', source: 'rule', rule: 'bash(touch tested*) (helper tester)' })
    expect(recorded.find((entry) => entry.command === 'touch other')?.permission).toMatchObject({ decision: 'reject', source: 'default' })
    // The child's header carries the helper's level, so its own children are under it too.
    const child = sessionsOf(join(dir, 'sessions')).find((stored) => stored.header.helper !== undefined)
    expect(child?.header.permissions).toEqual([{ from: 'helper tester', allow: ['bash(touch tested*)'] }])

    // The parent's configuration denies bash: the helper's allow cannot widen it.
    rmSyncQuiet(join(dir, 'tested'))
    const config = join(dir, 'deny.yml')
    writeFileSync(config, ['- id: approvals', '  name: "@dsh/approvals"', '  config: { deny: [bash] }'].join('\n'))
    const denied = await run(['--config', config, '--permission', 'allow'])
    expect(denied.code).toBe(0)
    expect(existsSync(join(dir, 'tested'))).toBe(false)
    expect(decisions(join(dir, 'sessions')).filter((entry) => entry.command === 'touch tested').at(-1)?.permission).toMatchObject({ decision: 'reject', source: 'rule', rule: 'bash (config)' })
  })

  it('a background child\'s request nobody answers is rejected after timeoutMs, the prompt is withdrawn, and the parent is told', async () => {
    const dir = tempDir()
    const script = join(dir, 'script.yml')
    writeFileSync(script, [
      '- when: { prompt: "audit quietly" }',
      '  reply:',
      '    - call: { tool: bash, args: { command: "touch audited" } }',
      '    - text: "auditor: {{last_tool_result}}"',
      '- when: { depth: 0 }',
      '  reply:',
      '    - call: { tool: subagent, args: { description: "auditor", prompt: "audit quietly", run_in_background: true } }',
      '    - call: { tool: task_output, args: { task_id: subagent-1, wait: true } }',
      '    - text: "root: {{last_tool_result}}"',
      '    - text: "told"',
    ].join('\n'))
    const config = join(dir, 'dsh.yml')
    writeFileSync(config, ['- id: approvals', '  name: "@dsh/approvals"', '  config: { timeoutMs: 1500 }'].join('\n'))
    const command = [process.execPath, dshBin, 'run', '--config', config, '--model', `scripted:${script}`, '--session-dir', dir, 'go'].map((part) => `'${part}'`).join(' ')
    tmux('new-session', '-d', '-s', session, '-x', '200', '-y', '50', `cd ${dir} && env DSH_HOME=${dir} ${command}; echo EXIT=$?; sleep 30`)
    await until((text) => text.includes('dsh › spawn "auditor" wants to run bash: touch audited'))
    const done = await until((text) => text.includes('EXIT='))
    expect(done).toContain('touch audited → withdrawn')
    expect(existsSync(join(dir, 'audited'))).toBe(false)
    const root = sessionsOf(dir).find((stored) => stored.header.parentSession === undefined)!
    const told = root.events.find((event) => event.type === 'input/queued' && JSON.stringify(event.message).includes('nobody answered within 2 s'))
    expect(told).toBeDefined()
    expect(decisions(dir).find((entry) => entry.command === 'touch audited')?.permission).toMatchObject({ decision: 'reject', source: 'timeout' })
  })
})

function rmSyncQuiet(path: string): void {
  try {
    rmSync(path)
  } catch {
    // not there
  }
}

