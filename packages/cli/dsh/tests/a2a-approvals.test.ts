/**
 * Approvals across an A2A delegation, with both CLIs as real processes: a root `dsh run`
 * (on a terminal under tmux, or piped) delegates through the `a2a` provider to a real
 * `dsh a2a serve` worker, whose task and its spawn child each want to run a command. The
 * worker (which trusts its callers with their approvals) asks its caller through
 * input-required; the provider asks the root's broker,
 * which prompts on the terminal naming the path through the worker; a rejected command is
 * not run, an allowed one is; a rule in the root's config decides without asking. The
 * worker itself refuses bad answers with clear errors and leaves the task as it was.
 */
import { existsSync, readFileSync, readdirSync, writeFileSync } from 'node:fs'
import { join } from 'node:path'
import { randomUUID } from 'node:crypto'
import { afterAll, afterEach, describe, expect, it } from 'vitest'
import { tmuxServer } from './tmux.js'
import { Role, TaskState, type Message, type StreamResponse } from '@a2a-js/sdk'
import { ClientFactory, DefaultAgentCardResolver, JsonRpcTransportFactory, type Client } from '@a2a-js/sdk/client'
import { dshBin, runDsh, tempDir } from './cli.js'
import { serve } from './a2a-serve-process.js'
import { until } from './processes.js'

const session = `dsh-a2a-approvals-${process.pid}`
const { tmux, stop: stopTmux } = tmuxServer(session)
afterAll(stopTmux)
const screen = () => tmux('capture-pane', '-p', '-J', '-t', session)

afterEach(() => {
  try {
    tmux('kill-session', '-t', session)
  } catch {
    // already gone
  }
})

/** The worker's agents: the task runs one command and delegates to a spawn child that runs another. Commands write into `dir`. */
function workerScript(dir: string): string {
  const file = join(dir, 'worker.yml')
  writeFileSync(file, [
    '- when: { prompt: "grand work" }',
    '  reply:',
    `    - call: { tool: bash, args: { command: "touch ${dir}/grand-ran" } }`,
    '    - text: "grand: {{last_tool_result}}"',
    '- reply:',
    `    - call: { tool: bash, args: { command: "touch ${dir}/worker-ran" } }`,
    '    - call: { tool: subagent, args: { description: "grand", prompt: "grand work" } }',
    '    - text: "worker finished"',
  ].join('\n'))
  return file
}

/** The root: delegates once through the a2a provider, then answers. `approvals`: lines of its broker's config. */
function rootFiles(dir: string, url: string, approvals: string[] = []): { script: string; config: string } {
  const script = join(dir, 'root.yml')
  writeFileSync(script, [
    '- when: { depth: 0 }',
    '  reply:',
    '    - call: { tool: subagent_a2a, args: { description: "remote", prompt: "do the remote work" } }',
    '    - text: "root finished: {{last_tool_result}}"',
  ].join('\n'))
  const config = join(dir, 'dsh.yml')
  writeFileSync(config, [
    '- id: subagent-a2a',
    '  name: "@dsh/subagent-a2a"',
    `  config: { urls: [${url}] }`,
    '- id: tool-subagent-a2a',
    '  name: "@dsh/tool-subagent"',
    '  config: { provider: a2a, toolName: subagent_a2a }',
    ...(approvals.length > 0 ? ['- id: approvals', '  name: "@dsh/approvals"', `  config: { ${approvals.join(', ')} }`] : []),
  ].join('\n'))
  return { script, config }
}

/** The permission recorded with each bash call of the sessions in `dir`, by command. */
function decisions(dir: string): Map<string, Record<string, unknown>> {
  const found = new Map<string, Record<string, unknown>>()
  for (const name of readdirSync(dir).filter((entry) => entry.endsWith('.jsonl'))) {
    const commands = new Map<string, string>()
    for (const line of readFileSync(join(dir, name), 'utf8').trim().split('\n').slice(1)) {
      const event = JSON.parse(line) as { type: string; call?: { id: string; args?: { command?: string } }; result?: { callId: string }; permission?: Record<string, unknown> }
      if (event.type === 'tool/call' && event.call?.args?.command) commands.set(event.call.id, event.call.args.command)
      if (event.type === 'tool/result' && event.permission) found.set(commands.get(event.result!.callId) ?? '?', event.permission)
    }
  }
  return found
}

/** The SDK's client; with `token`, every request carries it as a bearer. */
function sdkClient(url: string, token?: string): Promise<Client> {
  const fetchImpl: typeof fetch = token === undefined ? fetch : (input, init) => fetch(input, { ...init, headers: { ...(init?.headers as Record<string, string>), Authorization: `Bearer ${token}` } })
  return new ClientFactory({ transports: [new JsonRpcTransportFactory({ fetchImpl })], cardResolver: new DefaultAgentCardResolver({ fetchImpl }) }).createFromUrl(url)
}

function message(parts: Message['parts'], taskId = ''): Message {
  return { messageId: randomUUID(), contextId: '', taskId, role: Role.ROLE_USER, parts, metadata: undefined, extensions: [], referenceTaskIds: [] }
}

const text = (value: string): Message['parts'][number] => ({ content: { $case: 'text', value }, metadata: undefined, filename: '', mediaType: 'text/plain' })
const data = (value: unknown): Message['parts'][number] => ({ content: { $case: 'data', value }, metadata: undefined, filename: '', mediaType: 'application/json' })

async function stream(client: Client, sent: Message): Promise<StreamResponse[]> {
  const events: StreamResponse[] = []
  for await (const event of client.sendMessageStream({ tenant: '', message: sent, configuration: undefined, metadata: undefined })) events.push(event)
  return events
}

function last(events: StreamResponse[]): { state: TaskState | undefined; message: Message | undefined; taskId: string } {
  let state: TaskState | undefined
  let status: Message | undefined
  let taskId = ''
  for (const { payload } of events) {
    if (payload?.$case === 'task') ({ id: taskId } = payload.value)
    if (payload?.$case === 'task' || payload?.$case === 'statusUpdate') {
      state = payload.value.status?.state ?? state
      status = payload.value.status?.message ?? status
    }
  }
  return { state, message: status, taskId }
}

describe('approvals across an A2A delegation', () => {
  it('dsh run on a terminal is asked for the worker\'s and its child\'s commands, naming the path through the worker; the rejected one is not run, the allowed one is', async () => {
    const dir = tempDir()
    const served = await serve(['--model', `scripted:${workerScript(dir)}`, '--session-dir', join(dir, 'worker-sessions'), '--trust-caller-approvals'])
    const { script, config } = rootFiles(dir, served.url)
    const command = [process.execPath, dshBin, 'run', '--config', config, '--model', `scripted:${script}`, '--session-dir', dir, 'go'].map((part) => `'${part}'`).join(' ')
    tmux('new-session', '-d', '-s', session, '-x', '250', '-y', '50', `cd ${dir} && env DSH_HOME=${dir} ${command}; echo EXIT=$?; sleep 30`)

    const answers: Record<string, string> = { [`touch ${dir}/worker-ran`]: 'y', [`touch ${dir}/grand-ran`]: 'n' }
    const asked: string[] = []
    const openQuestion = (shown: string) => shown.split('\n').filter((line) => line.includes(' wants to run bash: ') && !line.includes(' → ')).at(-1)
    let shown = ''
    while (asked.length < 2) {
      await until(() => {
        shown = screen()
        return (openQuestion(shown) !== undefined && shown.includes('[y] allow once')) || shown.includes('EXIT=')
      })
      if (shown.includes('EXIT=')) break
      const question = openQuestion(shown)!.trim()
      const subject = Object.keys(answers).find((candidate) => question.endsWith(candidate))
      if (subject === undefined) throw new Error(`an unexpected question: ${question}`)
      asked.push(question)
      await new Promise((resolve) => setTimeout(resolve, 200)) // a person reads the prompt before answering: keys typed sooner are ignored
      tmux('send-keys', '-t', session, answers[subject]!)
      await until(() => screen().includes(`${subject} → `))
    }
    await until(() => {
      shown = screen()
      return shown.includes('EXIT=')
    })
    expect(shown).toContain('EXIT=0')
    expect(asked).toEqual([
      `dsh › a2a "remote" wants to run bash: touch ${dir}/worker-ran`,
      `dsh › a2a "remote" › spawn "grand" wants to run bash: touch ${dir}/grand-ran`,
    ])
    expect(existsSync(join(dir, 'worker-ran'))).toBe(true)
    expect(existsSync(join(dir, 'grand-ran'))).toBe(false)
    // The worker's sessions record who decided: the user at the root, through the A2A caller.
    const recorded = decisions(join(dir, 'worker-sessions'))
    expect(recorded.get(`touch ${dir}/worker-ran`)).toMatchObject({ decision: 'allow-once', by: 'the user at the terminal (through the A2A caller)', source: 'user' })
    expect(recorded.get(`touch ${dir}/grand-ran`)).toMatchObject({ decision: 'reject', by: 'the user at the terminal (through the A2A caller)', source: 'user' })
  })

  it('with nobody to ask, a rule in the root\'s config lets its command run on the worker unasked, and the root\'s default refuses the other', async () => {
    const dir = tempDir()
    const served = await serve(['--model', `scripted:${workerScript(dir)}`, '--session-dir', join(dir, 'worker-sessions'), '--trust-caller-approvals'])
    const { script, config } = rootFiles(dir, served.url, [`allow: ["bash(touch ${dir}/worker-ran)"]`])
    const result = await runDsh(['run', '--config', config, '--model', `scripted:${script}`, '--session-dir', dir, 'go'], { cwd: dir, timeoutMs: 60_000 })
    expect(result.code).toBe(0)
    expect(result.stdout).toContain('root finished: worker finished')
    expect(existsSync(join(dir, 'worker-ran'))).toBe(true)
    expect(existsSync(join(dir, 'grand-ran'))).toBe(false)
    const recorded = decisions(join(dir, 'worker-sessions'))
    // The root's rule travels with the delegation: the worker applies it itself.
    expect(recorded.get(`touch ${dir}/worker-ran`)).toMatchObject({ decision: 'allow-once', by: 'the policy', source: 'rule', rule: `bash(touch ${dir}/worker-ran) (config)` })
    // The other is asked of the root, where nobody is there to ask.
    expect(recorded.get(`touch ${dir}/grand-ran`)).toMatchObject({ decision: 'reject', by: 'dsh run --permission reject (through the A2A caller)', source: 'default' })
  })

  it("a worker started with --permission allow runs nothing under a root that rejects what no rule decides: the lineage's default bounds it, and the reason names the switches; under a root that allows, both commands run", async () => {
    const dir = tempDir()
    const served = await serve(['--model', `scripted:${workerScript(dir)}`, '--session-dir', join(dir, 'worker-sessions'), '--permission', 'allow'])
    await until(() => served.stderr().includes('dsh a2a: side effects no approval rule decides are allowed (--permission allow), except in a task a dsh parent delegated whose lineage does not allow them: those are rejected'))
    const { script, config } = rootFiles(dir, served.url)
    const refused = await runDsh(['run', '--config', config, '--model', `scripted:${script}`, '--session-dir', dir, '--permission', 'reject', 'go'], { cwd: dir, timeoutMs: 60_000 })
    expect(refused.code, refused.stderr).toBe(0)
    expect(refused.stdout).toContain('root finished: worker finished')
    expect(existsSync(join(dir, 'worker-ran'))).toBe(false)
    expect(existsSync(join(dir, 'grand-ran'))).toBe(false)
    const recorded = decisions(join(dir, 'worker-sessions'))
    for (const ran of ['worker-ran', 'grand-ran']) {
      expect(recorded.get(`touch ${dir}/${ran}`)).toMatchObject({ decision: 'reject', by: 'dsh a2a serve', source: 'default', reason: expect.stringMatching(/--permission allow does not widen .*--trust-caller-approvals.*--approver-token-env NAME/) })
    }

    const allowing = await runDsh(['run', '--config', config, '--model', `scripted:${script}`, '--session-dir', dir, '--permission', 'allow', 'go'], { cwd: dir, timeoutMs: 60_000 })
    expect(allowing.code, allowing.stderr).toBe(0)
    expect(existsSync(join(dir, 'worker-ran'))).toBe(true)
    expect(existsSync(join(dir, 'grand-ran'))).toBe(true)
  })

  it('the worker refuses bad answers with clear errors and the task stays waiting; a good answer then runs the command', async () => {
    const dir = tempDir()
    const script = join(dir, 'worker.yml')
    writeFileSync(script, ['- reply:', `    - call: { tool: bash, args: { command: "touch ${dir}/ran" } }`, '    - text: "after: {{last_tool_result}}"'].join('\n'))
    const served = await serve(['--model', `scripted:${script}`, '--session-dir', join(dir, 'sessions'), '--trust-caller-approvals'])
    const client = await sdkClient(served.url)
    const first = last(await stream(client, message([text('run it')])))
    expect(first.state).toBe(TaskState.TASK_STATE_INPUT_REQUIRED)
    const request = first.message!.parts.flatMap((part) => (part.content?.$case === 'data' ? [(part.content.value as { approvalRequest: { id: string } }).approvalRequest] : []))[0]!
    const { taskId } = first

    await expect(stream(client, message([data({ approval: 'approval-4242', decision: 'allow-once' })], taskId))).rejects.toThrow(/is not waiting for an answer to "approval-4242" \(never asked, or no longer waiting\)/)
    await expect(stream(client, message([data({ approval: request.id, decision: 'sure' })], taskId))).rejects.toThrow(/"decision" must be one of allow-once, allow-always, reject/)
    await expect(stream(client, message([], taskId))).rejects.toThrow()
    expect((await client.getTask({ tenant: '', id: taskId, historyLength: undefined })).status?.state).toBe(TaskState.TASK_STATE_INPUT_REQUIRED)
    expect(existsSync(join(dir, 'ran'))).toBe(false)

    const answered = last(await stream(client, message([data({ approval: request.id, decision: 'allow-once' })], taskId)))
    expect(answered.state).toBe(TaskState.TASK_STATE_COMPLETED)
    expect(existsSync(join(dir, 'ran'))).toBe(true)
    // A task that is not waiting takes no answer: this one has finished.
    await expect(stream(client, message([text('yes')], taskId))).rejects.toThrow(/terminal state/)
  })

  it('--permission reject decides alone, with no input-required; a --permission that is not one is a usage error', async () => {
    const dir = tempDir()
    const script = join(dir, 'worker.yml')
    writeFileSync(script, ['- reply:', `    - call: { tool: bash, args: { command: "touch ${dir}/ran" } }`, '    - text: "after: {{last_tool_result}}"'].join('\n'))
    const served = await serve(['--model', `scripted:${script}`, '--session-dir', join(dir, 'sessions'), '--permission', 'reject'])
    const done = last(await stream(await sdkClient(served.url), message([text('run it')])))
    expect(done.state).toBe(TaskState.TASK_STATE_COMPLETED)
    expect(existsSync(join(dir, 'ran'))).toBe(false)
    const refused = await runDsh(['a2a', 'serve', '--port', '0', '--model', `scripted:${script}`, '--permission', 'sometimes'])
    expect(refused.code).toBe(2)
    expect(refused.stderr.trim()).toBe('dsh a2a serve: --permission must be one of ask, allow, reject (got "sometimes")')
  })

  it("by default the worker's caller cannot approve: the command is rejected unasked with the reason naming the switches, stderr says so; with an approver token only the approver's answer runs it", async () => {
    const dir = tempDir()
    const script = join(dir, 'worker.yml')
    writeFileSync(script, ['- reply:', `    - call: { tool: bash, args: { command: "touch ${dir}/ran" } }`, '    - text: "after: {{last_tool_result}}"'].join('\n'))
    const plain = await serve(['--model', `scripted:${script}`, '--session-dir', join(dir, 'sessions')])
    await until(() => plain.stderr().includes("dsh a2a: side effects no approval rule decides are rejected: a task's caller may not approve its own; pass --approver-token-env NAME or --trust-caller-approvals to have them asked"))
    const rejected = last(await stream(await sdkClient(plain.url), message([text('run it')])))
    expect(rejected.state).toBe(TaskState.TASK_STATE_COMPLETED)
    expect(existsSync(join(dir, 'ran'))).toBe(false)

    const approved = await serve(['--model', `scripted:${script}`, '--session-dir', join(dir, 'sessions-2'), '--approver-token-env', 'DSH_TEST_APPROVER'], { DSH_TEST_APPROVER: 'approver-secret' })
    const caller = await sdkClient(approved.url)
    const first = last(await stream(caller, message([text('run it')])))
    expect(first.state).toBe(TaskState.TASK_STATE_INPUT_REQUIRED)
    await expect(stream(caller, message([text('yes')], first.taskId))).rejects.toThrow(/waits for its approver's answer to approval-\d+, not its caller's/)
    expect(existsSync(join(dir, 'ran'))).toBe(false)
    const done = last(await stream(await sdkClient(approved.url, 'approver-secret'), message([text('yes')], first.taskId)))
    expect(done.state).toBe(TaskState.TASK_STATE_COMPLETED)
    expect(existsSync(join(dir, 'ran'))).toBe(true)

    const mixed = await runDsh(['a2a', 'serve', '--port', '0', '--model', `scripted:${script}`, '--permission', 'reject', '--trust-caller-approvals'])
    expect(mixed.code).toBe(2)
    expect(mixed.stderr.trim()).toMatch(/^dsh a2a serve: an approver and trusting callers only choose who answers with permission ask/)
  })
})
