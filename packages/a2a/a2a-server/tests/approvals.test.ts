/**
 * dsh a2a serve as a front-end of the approval broker: a side effect no rule decided puts
 * the task in input-required, naming the agent path, the tool and the command, with a
 * data part a client answers by id; the caller's next message on the task answers it
 * (when the worker trusts its callers with their approvals: `trustCallerApprovals`)
 * (a data part, or yes / always / no as text), and the task works on. Real parts: the
 * SDK's client over HTTP, the real bash tool writing marker files, the real broker.
 */
import { existsSync, mkdtempSync, realpathSync } from 'node:fs'
import { tmpdir } from 'node:os'
import { join } from 'node:path'
import { afterEach, describe, expect, it } from 'vitest'
import { TaskState, type Message, type Part, type StreamResponse, type Task } from '@a2a-js/sdk'
import type { Client } from '@a2a-js/sdk/client'
import { ApprovalService } from '@dsh/approvals'
import { BashService } from '@dsh/bash'
import { BashToolPlugin } from '@dsh/tool-bash'
import { serveA2a, type A2aServerOptions } from '@dsh/a2a-server'
import { NOBODY_ANSWERS, type A2aApprovalRequest } from '../src/approvals.js'
import { createHarness } from '@dsh/testkit/harness'
import type { Script } from '@dsh/llm-scripted'
import type { Session } from '@dsh/session'
import { artifactText, finalState, sdkClient, startWorker, streamAll, until, userMessage, type Worker } from './helpers.js'

interface ApprovalWorker extends Worker {
  /** The cwd of every task: where the commands write their marker files. */
  dir: string
}

const started: ApprovalWorker[] = []
afterEach(async () => {
  await Promise.all(started.splice(0).map((worker) => worker.dispose()))
})

/** A worker whose agents run real bash commands under the approval broker (its config: `approvals`). */
async function approvalWorker(script: Script, options: { approvals?: Partial<ApprovalService.Config>; server?: A2aServerOptions; children?: boolean } = {}): Promise<ApprovalWorker> {
  const dir = realpathSync(mkdtempSync(join(tmpdir(), 'a2a-approvals-')))
  // These tests are of the caller answering: the worker trusts its callers with their approvals (the default is nobody: approvers.test.ts).
  const trust = (options.server?.permission ?? 'ask') === 'ask' ? { trustCallerApprovals: true } : {}
  const worker = await startWorker(script, { cwd: dir, ...trust, ...options.server }, async (harness) => {
    await harness.plugin(ApprovalService, options.approvals ?? {})
    await harness.plugin(BashService)
    await harness.plugin(BashToolPlugin)
    if (!options.children) return
    const { SubagentService } = await import('@dsh/subagent')
    const { SpawnPlugin } = await import('@dsh/subagent-spawn')
    const { SubagentToolPlugin } = await import('@dsh/tool-subagent')
    await harness.plugin(SubagentService)
    await harness.plugin(SpawnPlugin, {})
    await harness.plugin(SubagentToolPlugin, { provider: 'spawn', enableRunInBackground: false })
  })
  const withDir = Object.assign(worker, { dir })
  started.push(withDir)
  return withDir
}

const RUN_IT: Script = [{ reply: [{ call: { tool: 'bash', args: { command: 'touch ran' } } }, { text: 'after: {{last_tool_result}}' }] }]

function taskOf(events: StreamResponse[]): Task {
  const first = events[0]?.payload
  if (first?.$case !== 'task') throw new Error(`the first event is not the task: ${JSON.stringify(first)}`)
  return first.value
}

/** The last status message of a stream. */
function lastStatus(events: StreamResponse[]): Message | undefined {
  let message: Message | undefined
  for (const { payload } of events) if (payload?.$case === 'statusUpdate' && payload.value.status?.message) message = payload.value.status.message
  return message
}

function textOf(message: Message | undefined): string {
  return (message?.parts ?? []).map((part) => (part.content?.$case === 'text' ? part.content.value : '')).join('')
}

function requestOf(message: Message | undefined): A2aApprovalRequest {
  const data = (message?.parts ?? []).find((part) => part.content?.$case === 'data')
  const value = data?.content?.$case === 'data' ? (data.content.value as { approvalRequest?: A2aApprovalRequest }).approvalRequest : undefined
  if (!value) throw new Error(`no approval request in ${JSON.stringify(message)}`)
  return value
}

function dataPart(value: unknown): Part {
  return { content: { $case: 'data', value }, metadata: undefined, filename: '', mediaType: 'application/json' }
}

/** A message on `taskId`: an answer by data part, or by text. */
function answer(taskId: string, body: string | Record<string, unknown>, extra: Partial<Message> = {}): Message {
  const message = userMessage(typeof body === 'string' ? body : '')
  return { ...message, taskId, parts: typeof body === 'string' ? message.parts : [dataPart(body)], ...extra }
}

async function stateOf(client: Client, taskId: string): Promise<TaskState | undefined> {
  return (await client.getTask({ tenant: '', id: taskId, historyLength: undefined })).status?.state
}

/** The permission recorded with each tool result of a session. */
function permissions(session: Session): unknown[] {
  return session.events().flatMap((event) => (event.type === 'tool/result' && event.permission ? [event.permission] : []))
}

describe('dsh a2a serve asks its caller through input-required', () => {
  it('a command no rule decided puts the task in input-required, naming the agent, the tool and the command; a data part allowing it once lets it run and the task completes', async () => {
    const w = await approvalWorker(RUN_IT)
    const client = await sdkClient(w.server.url)
    const first = await streamAll(client, userMessage('run it'))
    const task = taskOf(first)
    expect(finalState(first)).toBe(TaskState.TASK_STATE_INPUT_REQUIRED)
    const asked = lastStatus(first)
    expect(textOf(asked)).toMatch(/^dsh a2a wants to run bash: touch ran\. Answer on this task: yes/)
    const request = requestOf(asked)
    expect(request).toEqual({ id: expect.stringMatching(/^approval-\d+$/), below: [], tool: 'bash', subject: 'touch ran', kind: 'execute', expiresAt: expect.any(String), decisions: ['allow-once', 'allow-always', 'reject'] })
    expect(existsSync(join(w.dir, 'ran'))).toBe(false)
    expect(await stateOf(client, task.id)).toBe(TaskState.TASK_STATE_INPUT_REQUIRED)

    const second = await streamAll(client, answer(task.id, { approval: request.id, decision: 'allow-once' }))
    // Every message's stream begins with the task, then the task works on.
    expect(second[0]?.payload?.$case).toBe('task')
    expect(second.some(({ payload }) => payload?.$case === 'statusUpdate' && payload.value.status?.state === TaskState.TASK_STATE_WORKING)).toBe(true)
    expect(finalState(second)).toBe(TaskState.TASK_STATE_COMPLETED)
    expect(artifactText(second, 'answer')).toMatch(/^after: /)
    expect(existsSync(join(w.dir, 'ran'))).toBe(true)
    expect(await stateOf(client, task.id)).toBe(TaskState.TASK_STATE_COMPLETED)
    expect(permissions(w.sessions[0]!)).toEqual([{ decision: 'allow-once', by: 'the A2A caller', source: 'user', at: expect.any(Number) }])
  })

  it('plain text answers for a generic client, over the blocking call and the HTTP+JSON binding: no rejects (the command is not run), any other text is a no the agent hears in its caller\'s words, always allows', async () => {
    const w = await approvalWorker([
      { when: { prompt: 'refuse' }, reply: [{ call: { tool: 'bash', args: { command: 'touch refused' } } }, { text: 'told: {{last_tool_result}}' }] },
      { when: { prompt: 'explain' }, reply: [{ call: { tool: 'bash', args: { command: 'touch explained' } } }, { text: 'told: {{last_tool_result}}' }] },
      { when: { prompt: 'allow' }, reply: [{ call: { tool: 'bash', args: { command: 'touch allowed' } } }, { text: 'done' }] },
    ])
    const client = await sdkClient(w.server.url, undefined, 'rest')
    const send = async (message: Message) => (await client.sendMessage({ tenant: '', message, configuration: undefined, metadata: undefined })) as Task

    const refused = await send(userMessage('refuse it'))
    expect(refused.status?.state).toBe(TaskState.TASK_STATE_INPUT_REQUIRED)
    const after = await send(answer(refused.id, 'No.'))
    expect(after.status?.state).toBe(TaskState.TASK_STATE_COMPLETED)
    expect(existsSync(join(w.dir, 'refused'))).toBe(false)
    expect(textOf({ parts: after.artifacts[0]!.parts } as Message)).toMatch(/^told: bash was not run: permission denied by the A2A caller: the caller rejected it/)

    const explained = await send(userMessage('explain it'))
    const told = await send(answer(explained.id, 'use the staging copy instead'))
    expect(existsSync(join(w.dir, 'explained'))).toBe(false)
    expect(textOf({ parts: told.artifacts[0]!.parts } as Message)).toContain('the caller answered: "use the staging copy instead"')

    const allowed = await send(userMessage('allow it'))
    expect((await send(answer(allowed.id, 'always'))).status?.state).toBe(TaskState.TASK_STATE_COMPLETED)
    expect(existsSync(join(w.dir, 'allowed'))).toBe(true)
    expect(permissions(w.sessions[2]!)).toEqual([expect.objectContaining({ decision: 'allow-always', by: 'the A2A caller', source: 'user' })])
  })

  it('bad answers are clear errors that change nothing: to a task that is not waiting, a malformed or empty one, an id never asked, from another context; then a good answer still works', async () => {
    const w = await approvalWorker([
      { when: { prompt: 'slow' }, reply: [{ text: 'slow', delay_ms: 60_000 }] },
      { reply: RUN_IT[0]!.reply },
    ])
    const client = await sdkClient(w.server.url)

    // A task that is working, not waiting for an answer.
    let workingId: string | undefined
    const slow = streamAll(client, userMessage('slow work'), (event) => {
      if (event.payload?.$case === 'task') workingId = event.payload.value.id
    })
    await until(() => workingId !== undefined && w.sessions.length === 1)
    await expect(streamAll(client, answer(workingId!, 'yes'))).rejects.toThrow(/is working and is not waiting for an answer/)
    await client.cancelTask({ tenant: '', id: workingId!, metadata: undefined })
    expect(finalState(await slow)).toBe(TaskState.TASK_STATE_CANCELED)

    const first = await streamAll(client, userMessage('run it'))
    const task = taskOf(first)
    const request = requestOf(lastStatus(first))
    await expect(streamAll(client, answer(task.id, { approval: request.id, decision: 'maybe' }))).rejects.toThrow(/"decision" must be one of allow-once, allow-always, reject; got "maybe"/)
    await expect(streamAll(client, answer(task.id, { approval: 7, decision: 'allow-once' }))).rejects.toThrow(/"approval" must be the id of the request asked/)
    await expect(streamAll(client, answer(task.id, { approval: 'approval-999999', decision: 'allow-once' }))).rejects.toThrow(/is not waiting for an answer to "approval-999999" \(never asked, or no longer waiting\); it is asking approval-\d+ \(bash touch ran\)/)
    await expect(streamAll(client, answer(task.id, '   '))).rejects.toThrow(/holds no answer/)
    await expect(streamAll(client, answer(task.id, 'yes', { contextId: 'another-context' }))).rejects.toThrow(new RegExp(`belongs to context ${task.contextId}, not another-context`))
    expect(await stateOf(client, task.id)).toBe(TaskState.TASK_STATE_INPUT_REQUIRED)
    expect(existsSync(join(w.dir, 'ran'))).toBe(false)
    // None of them was taken into the task's history.
    const history = (await client.getTask({ tenant: '', id: task.id, historyLength: 50 })).history
    expect(history.filter((message) => message.role === 1)).toHaveLength(1)

    const done = await streamAll(client, answer(task.id, { approval: request.id, decision: 'allow-once' }))
    expect(finalState(done)).toBe(TaskState.TASK_STATE_COMPLETED)
    expect(existsSync(join(w.dir, 'ran'))).toBe(true)
    // A finished task takes no answer either.
    await expect(streamAll(client, answer(task.id, 'yes'))).rejects.toThrow(/terminal state/)
  })

  it('several requests are asked one at a time, each naming the child below the task that wants it', async () => {
    const w = await approvalWorker([
      { when: { prompt: 'first work' }, reply: [{ call: { tool: 'bash', args: { command: 'touch one' } } }, { text: 'one done' }] },
      { when: { prompt: 'second work' }, reply: [{ call: { tool: 'bash', args: { command: 'touch two' } } }, { text: 'two done' }] },
      { when: { depth: 0 }, reply: [{ calls: [
        { tool: 'subagent', args: { description: 'first', prompt: 'first work' } },
        { tool: 'subagent', args: { description: 'second', prompt: 'second work' } },
      ] }, { text: 'both asked' }] },
    ], { children: true })
    const client = await sdkClient(w.server.url)
    const first = await streamAll(client, userMessage('delegate both'))
    const task = taskOf(first)
    const asked = requestOf(lastStatus(first))
    // Both children wait; only one request is shown.
    await until(() => w.harness.ctx.approvals.pending().length === 2)
    const [shown, waiting] = w.harness.ctx.approvals.pending().sort((a, b) => (a.id === asked.id ? -1 : b.id === asked.id ? 1 : 0))
    expect(asked.below).toEqual([shown!.path[1]])
    expect(textOf(lastStatus(first))).toContain(`dsh a2a › ${shown!.path[1]} wants to run bash: ${shown!.subject}`)
    await expect(streamAll(client, answer(task.id, { approval: waiting!.id, decision: 'allow-once' }))).rejects.toThrow(new RegExp(`asks one request at a time and is asking ${asked.id} .*, not ${waiting!.id} yet`))

    const second = await streamAll(client, answer(task.id, { approval: asked.id, decision: 'reject' }))
    expect(finalState(second)).toBe(TaskState.TASK_STATE_INPUT_REQUIRED)
    const next = requestOf(lastStatus(second))
    expect(next).toMatchObject({ id: waiting!.id, below: [waiting!.path[1]], subject: waiting!.subject })
    const third = await streamAll(client, answer(task.id, 'yes'))
    expect(finalState(third)).toBe(TaskState.TASK_STATE_COMPLETED)
    expect(existsSync(join(w.dir, shown!.subject.slice('touch '.length)))).toBe(false)
    expect(existsSync(join(w.dir, waiting!.subject.slice('touch '.length)))).toBe(true)
  })

  it('cancelling a task in input-required rejects its request at once: the command is not run, and the task ends canceled', async () => {
    const w = await approvalWorker(RUN_IT)
    const client = await sdkClient(w.server.url)
    const task = taskOf(await streamAll(client, userMessage('run it')))
    const cancelled = await client.cancelTask({ tenant: '', id: task.id, metadata: undefined })
    expect(cancelled.status?.state).toBe(TaskState.TASK_STATE_CANCELED)
    expect(existsSync(join(w.dir, 'ran'))).toBe(false)
    expect(w.harness.ctx.approvals.pending()).toEqual([])
    expect(permissions(w.sessions[0]!)).toEqual([expect.objectContaining({ decision: 'reject', source: 'cancelled' })])
    expect(w.server.taskCount).toBe(0)
  })

  it('a request nobody answers is withdrawn after the broker\'s timeoutMs: the task works on without a message, and what it did is stored', async () => {
    const w = await approvalWorker(RUN_IT, { approvals: { timeoutMs: 200 } })
    const client = await sdkClient(w.server.url)
    const task = taskOf(await streamAll(client, userMessage('run it')))
    await until(() => w.server.taskCount === 0)
    const stored = await client.getTask({ tenant: '', id: task.id, historyLength: 50 })
    expect(stored.status?.state).toBe(TaskState.TASK_STATE_COMPLETED)
    expect(textOf({ parts: stored.artifacts[0]!.parts } as Message)).toMatch(/^after: bash was not run: permission denied by the approval broker: nobody answered within/)
    expect(stored.history.some((message) => textOf(message).includes('was withdrawn: nobody answered within'))).toBe(true)
    expect(existsSync(join(w.dir, 'ran'))).toBe(false)
  })

  it('a subscriber to a task in input-required sees it answered and the stream end at its final state', async () => {
    const w = await approvalWorker(RUN_IT)
    const client = await sdkClient(w.server.url)
    const task = taskOf(await streamAll(client, userMessage('run it')))
    const seen: StreamResponse[] = []
    const subscribed = (async () => {
      for await (const event of client.resubscribeTask({ tenant: '', id: task.id })) seen.push(event)
    })()
    await until(() => seen.length > 0)
    expect(seen[0]?.payload?.$case).toBe('task')
    await streamAll(client, answer(task.id, 'yes'))
    await subscribed
    expect(finalState(seen)).toBe(TaskState.TASK_STATE_COMPLETED)
  })

  it('a rule decides before anyone is asked; --permission reject and allow decide alone for callers that cannot answer', async () => {
    const ruled = await approvalWorker(RUN_IT, { approvals: { allow: ['bash(touch ran)'] } })
    const ruledEvents = await streamAll(await sdkClient(ruled.server.url), userMessage('run it'))
    expect(finalState(ruledEvents)).toBe(TaskState.TASK_STATE_COMPLETED)
    expect(existsSync(join(ruled.dir, 'ran'))).toBe(true)

    const rejecting = await approvalWorker(RUN_IT, { server: { permission: 'reject' } })
    const rejected = await streamAll(await sdkClient(rejecting.server.url), userMessage('run it'))
    expect(finalState(rejected)).toBe(TaskState.TASK_STATE_COMPLETED)
    expect(existsSync(join(rejecting.dir, 'ran'))).toBe(false)
    expect(permissions(rejecting.sessions[0]!)).toEqual([expect.objectContaining({ decision: 'reject', by: 'dsh a2a serve --permission reject', source: 'default' })])

    const allowing = await approvalWorker(RUN_IT, { server: { permission: 'allow' } })
    expect(finalState(await streamAll(await sdkClient(allowing.server.url), userMessage('run it')))).toBe(TaskState.TASK_STATE_COMPLETED)
    expect(existsSync(join(allowing.dir, 'ran'))).toBe(true)
  })

  it('a permission that is not one, or allow without a broker, is refused at start', async () => {
    const harness = await createHarness({ script: RUN_IT })
    try {
      await expect(serveA2a(harness.ctx, { permission: 'sometimes' as never })).rejects.toThrow(/permission must be one of ask, allow, reject \(got sometimes\)/)
      await expect(serveA2a(harness.ctx, { permission: 'allow' })).rejects.toThrow(/permission allow needs the approval broker/)
    } finally {
      await harness.dispose()
    }
  })
})

describe("who answers: a task's caller does not approve its own side effects unless the worker trusts callers", () => {
  it('by default nobody is asked: a command no rule decided is rejected at once, not run, and the reason names what to configure', async () => {
    const w = await approvalWorker(RUN_IT, { server: { trustCallerApprovals: false } })
    const client = await sdkClient(w.server.url)
    const events = await streamAll(client, userMessage('run it'))
    expect(events.some(({ payload }) => payload?.$case === 'statusUpdate' && payload.value.status?.state === TaskState.TASK_STATE_INPUT_REQUIRED)).toBe(false)
    expect(finalState(events)).toBe(TaskState.TASK_STATE_COMPLETED)
    expect(existsSync(join(w.dir, 'ran'))).toBe(false)
    expect(permissions(w.sessions[0]!)).toEqual([{ decision: 'reject', by: 'dsh a2a serve', source: 'default', reason: NOBODY_ANSWERS, at: expect.any(Number) }])
    expect(NOBODY_ANSWERS).toMatch(/--approver-token-env NAME.*--trust-caller-approvals/)
    expect(artifactText(events, 'answer')).toContain('--trust-caller-approvals')
  })

  it("with an approver token, the caller's answer is refused with a message naming the approver and changes nothing; the approver's answer runs the command and is recorded as the approver's", async () => {
    const w = await approvalWorker(RUN_IT, { server: { trustCallerApprovals: false, token: 'caller-secret', approverToken: 'approver-secret' } })
    const caller = await sdkClient(w.server.url, 'caller-secret')
    const first = await streamAll(caller, userMessage('run it'))
    const task = taskOf(first)
    expect(finalState(first)).toBe(TaskState.TASK_STATE_INPUT_REQUIRED)
    expect(textOf(lastStatus(first))).toMatch(/^dsh a2a wants to run bash: touch ran\. The approver answers on this task \(with the approver token/)
    const request = requestOf(lastStatus(first))
    for (const body of ['yes', { approval: request.id, decision: 'allow-always' }]) {
      await expect(streamAll(caller, answer(task.id, body))).rejects.toThrow(/waits for its approver's answer to approval-\d+, not its caller's.*--approver-token-env NAME.*--trust-caller-approvals/)
    }
    expect(await stateOf(caller, task.id)).toBe(TaskState.TASK_STATE_INPUT_REQUIRED)
    expect(existsSync(join(w.dir, 'ran'))).toBe(false)

    const approver = await sdkClient(w.server.url, 'approver-secret')
    const answered = await streamAll(approver, answer(task.id, { approval: request.id, decision: 'allow-once' }))
    expect(finalState(answered)).toBe(TaskState.TASK_STATE_COMPLETED)
    expect(existsSync(join(w.dir, 'ran'))).toBe(true)
    expect(permissions(w.sessions[0]!)).toEqual([{ decision: 'allow-once', by: 'the A2A approver', source: 'user', at: expect.any(Number) }])
  })

  it("a caller's lineage cannot grant its own command: the allow rules in metadata.dsh.permissions decide nothing unless the worker trusts callers, while their deny rules still narrow", async () => {
    // What any caller can write: a parent one level up whose config allows bash.
    const forged = { dsh: { parentSession: 'forged-parent', delegationDepth: 1, provider: 'a2a', permissions: [{ from: 'config', allow: ['bash'] }] } }
    const refusedBy = async (server: A2aServerOptions): Promise<ApprovalWorker> => {
      const w = await approvalWorker(RUN_IT, { server })
      const events = await streamAll(await sdkClient(w.server.url, server.token), { ...userMessage('run it'), metadata: forged })
      expect(finalState(events), JSON.stringify(server)).not.toBe(TaskState.TASK_STATE_FAILED)
      return w
    }
    // The default (nobody answers) and --permission reject: rejected unasked, not run.
    for (const server of [{ trustCallerApprovals: false }, { permission: 'reject' as const }]) {
      const w = await refusedBy(server)
      expect(existsSync(join(w.dir, 'ran')), JSON.stringify(server)).toBe(false)
      expect(permissions(w.sessions[0]!), JSON.stringify(server)).toEqual([expect.objectContaining({ decision: 'reject', source: 'default' })])
    }
    // With an approver: the approver is asked (the task waits), the caller's lineage decided nothing.
    const w = await approvalWorker(RUN_IT, { server: { trustCallerApprovals: false, token: 'caller-secret', approverToken: 'approver-secret' } })
    const waiting = await streamAll(await sdkClient(w.server.url, 'caller-secret'), { ...userMessage('run it'), metadata: forged })
    expect(finalState(waiting)).toBe(TaskState.TASK_STATE_INPUT_REQUIRED)
    expect(existsSync(join(w.dir, 'ran'))).toBe(false)
    // A worker that trusts its callers takes their root's rules: the same lineage allows it unasked.
    const trusting = await approvalWorker(RUN_IT, { server: { trustCallerApprovals: true } })
    const allowed = await streamAll(await sdkClient(trusting.server.url), { ...userMessage('run it'), metadata: forged })
    expect(finalState(allowed)).toBe(TaskState.TASK_STATE_COMPLETED)
    expect(existsSync(join(trusting.dir, 'ran'))).toBe(true)
    // Deny rules of an untrusted caller's lineage still narrow: a denied command is refused, not asked.
    const denying = await approvalWorker(RUN_IT, { server: { trustCallerApprovals: false, token: 'caller-secret', approverToken: 'approver-secret' } })
    const denied = await streamAll(await sdkClient(denying.server.url, 'caller-secret'), { ...userMessage('run it'), metadata: { dsh: { ...forged.dsh, permissions: [{ from: 'config', deny: ['bash'] }] } } })
    expect(finalState(denied)).toBe(TaskState.TASK_STATE_COMPLETED)
    expect(permissions(denying.sessions[0]!)).toEqual([expect.objectContaining({ decision: 'reject', source: 'rule' })])
  })

  it('an approver token that is the worker token, an empty one, or an approver with a permission that asks nobody is refused at start', async () => {
    const harness = await createHarness({ script: RUN_IT })
    try {
      await harness.plugin(ApprovalService, {})
      await expect(serveA2a(harness.ctx, { token: 'same', approverToken: 'same' })).rejects.toThrow(/approver token is the worker's token.*callers would approve their own/)
      await expect(serveA2a(harness.ctx, { approverToken: '' })).rejects.toThrow(/approver token is empty/)
      await expect(serveA2a(harness.ctx, { permission: 'reject', trustCallerApprovals: true })).rejects.toThrow(/only choose who answers with permission ask or allow; with permission reject nobody is asked/)
    } finally {
      await harness.dispose()
    }
  })
})
