/**
 * The a2a provider answers a dsh worker's input-required through the parent's approval
 * broker: the parent's front-end is asked with the path through the worker, its answer
 * goes back on the same task with who decided, and the worker's command runs or not as
 * decided; the parent's rules decide first, never more permissively than the worker's; a
 * plain A2A agent's question ends the run saying what it asked; a run cancelled while its
 * request is pending withdraws it. Real parts: a real dsh worker (its broker, the real
 * bash tool) over HTTP, the real parent broker; only the models are scripted.
 */
import { existsSync, mkdtempSync, realpathSync } from 'node:fs'
import { tmpdir } from 'node:os'
import { join } from 'node:path'
import { afterEach, describe, expect, it } from 'vitest'
import { TaskState } from '@a2a-js/sdk'
import { AgentEvent, type AgentExecutor } from '@a2a-js/sdk/server'
import { ApprovalService, type ApprovalRequestInfo, type FrontEndAnswer } from '@dsh/approvals'
import { BashService } from '@dsh/bash'
import { BashToolPlugin } from '@dsh/tool-bash'
import type { Script } from '@dsh/llm-scripted'
import type { Session } from '@dsh/session'
import SessionJsonl from '@dsh/session-jsonl'
import { text } from '@dsh/llm'
import { DESCRIPTOR_VERSION, outputText } from '@dsh/subagent'
import type { A2aProvider } from '@dsh/subagent-a2a'
import { dshWorker, parentWith, sdkAgent, until, type DshWorker, type Parent, type PlainServer } from './helpers.js'

const cleanups: Array<() => Promise<void>> = []
afterEach(async () => {
  for (const cleanup of cleanups.splice(0).reverse()) await cleanup()
})

/** A dsh worker whose agents run real bash commands (in `dir`) under its own broker, with a spawn provider for children. */
async function worker(script: Script, approvals: Partial<ApprovalService.Config> = {}, stored = false): Promise<DshWorker & { dir: string }> {
  const dir = realpathSync(mkdtempSync(join(tmpdir(), 'a2a-provider-approvals-')))
  // The dsh parent answers for its user: this worker trusts its callers with their approvals (dsh a2a serve --trust-caller-approvals).
  const started = await dshWorker(script, { cwd: dir, trustCallerApprovals: true }, async (harness) => {
    // Stored sessions: the worker can hold a continuable child's context.
    if (stored) await harness.plugin(SessionJsonl, { dir: join(dir, 'sessions') })
    await harness.plugin(ApprovalService, approvals)
    await harness.plugin(BashService)
    await harness.plugin(BashToolPlugin)
    const { SubagentService } = await import('@dsh/subagent')
    const { SpawnPlugin } = await import('@dsh/subagent-spawn')
    const { SubagentToolPlugin } = await import('@dsh/tool-subagent')
    await harness.plugin(SubagentService)
    await harness.plugin(SpawnPlugin, {})
    await harness.plugin(SubagentToolPlugin, { provider: 'spawn', enableRunInBackground: false })
  })
  cleanups.push(() => started.dispose())
  return Object.assign(started, { dir })
}

/** A parent with the a2a provider and, unless `broker` is false, the approval broker (its config: `approvals`). */
async function parent(urls: string[], approvals: Partial<ApprovalService.Config> | false = {}): Promise<Parent> {
  const started = await parentWith({ urls })
  cleanups.push(() => started.harness.dispose())
  if (approvals !== false) await started.harness.plugin(ApprovalService, approvals)
  return started
}

/** A front-end on the parent's broker that records what it is asked and answers with `answer`. */
function frontEnd(p: Parent, answer: (request: ApprovalRequestInfo, signal: AbortSignal) => Promise<FrontEndAnswer> | FrontEndAnswer): ApprovalRequestInfo[] {
  const asked: ApprovalRequestInfo[] = []
  p.harness.ctx.approvals.addFrontEnd({
    name: 'the test user',
    ask: async (request, signal) => {
      asked.push(request)
      return answer(request, signal)
    },
  })
  return asked
}

/** The worker's task delegates to a spawn child, which wants to run `touch ran`. */
const THROUGH_A_CHILD: Script = [
  { when: { prompt: 'grand work' }, reply: [{ call: { tool: 'bash', args: { command: 'touch ran' } } }, { text: 'grand: {{last_tool_result}}' }] },
  { when: { depth: 1 }, reply: [{ call: { tool: 'subagent', args: { description: 'grand', prompt: 'grand work' } } }, { text: 'worker: {{last_tool_result}}' }] },
]

const RUN_IT: Script = [{ reply: [{ call: { tool: 'bash', args: { command: 'touch ran' } } }, { text: 'worker: {{last_tool_result}}' }] }]

/** The permission recorded with each tool result in the worker's sessions. */
function permissions(sessions: Session[]): unknown[] {
  return sessions.flatMap((session) => session.events().flatMap((event) => (event.type === 'tool/result' && event.permission ? [event.permission] : [])))
}

describe('the a2a provider answers a dsh worker\'s approval requests through the parent\'s broker', () => {
  it('the parent\'s front-end is asked with the path through the worker and its child; a rejection leaves the command unrun, and the worker records who decided', async () => {
    const w = await worker(THROUGH_A_CHILD)
    const p = await parent([w.server.url])
    const asked = frontEnd(p, () => ({ decision: 'reject', by: 'the test user', reason: 'not today' }))
    const run = await p.harness.ctx.subagents.start('a2a', p.request('delegate it', { label: 'review' }))
    const result = await run.result
    await run.dispose()
    expect(result.stopReason).toBe('completed')
    expect(asked.map((request) => ({ path: request.path, tool: request.tool, subject: request.subject, child: request.child }))).toEqual([
      { path: ['dsh test', 'a2a "review"', 'spawn "grand"'], tool: 'bash', subject: 'touch ran', child: run.id },
    ])
    expect(existsSync(join(w.dir, 'ran'))).toBe(false)
    expect(outputText(result.output)).toContain('permission denied by the test user (through the A2A caller): not today')
    expect(permissions(w.sessions)).toEqual([{ decision: 'reject', by: 'the test user (through the A2A caller)', reason: 'not today', source: 'user', at: expect.any(Number) }])
  })

  it('an allow runs the command on the worker', async () => {
    const w = await worker(RUN_IT)
    const p = await parent([w.server.url])
    const asked = frontEnd(p, () => ({ decision: 'allow-once', by: 'the test user' }))
    const run = await p.harness.ctx.subagents.start('a2a', p.request('run it', { label: 'runner' }))
    const result = await run.result
    await run.dispose()
    expect(result.stopReason).toBe('completed')
    expect(asked.map((request) => request.path)).toEqual([['dsh test', 'a2a "runner"']])
    expect(existsSync(join(w.dir, 'ran'))).toBe(true)
    expect(permissions(w.sessions)).toEqual([expect.objectContaining({ decision: 'allow-once', by: 'the test user (through the A2A caller)', source: 'user' })])
  })

  it('a rule in the parent\'s config decides without asking anyone (it travels with the lineage, so the worker applies it); a rule of the worker that asks is never passed by the parent\'s allow', async () => {
    const w = await worker(RUN_IT)
    const p = await parent([w.server.url], { allow: ['bash(touch ran)'] })
    const asked = frontEnd(p, () => ({ decision: 'reject', by: 'the test user', reason: 'should not be asked' }))
    const run = await p.harness.ctx.subagents.start('a2a', p.request('run it'))
    expect((await run.result).stopReason).toBe('completed')
    await run.dispose()
    expect(asked).toEqual([])
    expect(existsSync(join(w.dir, 'ran'))).toBe(true)
    expect(permissions(w.sessions)).toEqual([expect.objectContaining({ decision: 'allow-once', by: 'the policy', source: 'rule', rule: 'bash(touch ran) (config)' })])
    expect(w.sessions[0]!.header.permissions).toEqual([{ from: 'config', allow: ['bash(touch ran)'] }])

    // The worker's own rule asks about bash: the parent's allow rule cannot let it through unasked.
    const strict = await worker(RUN_IT, { ask: ['bash'] })
    const q = await parent([strict.server.url], { allow: ['bash'] })
    const strictAsked = frontEnd(q, () => ({ decision: 'reject', by: 'the test user', reason: 'no' }))
    const second = await q.harness.ctx.subagents.start('a2a', q.request('run it'))
    expect((await second.result).stopReason).toBe('completed')
    await second.dispose()
    expect(strictAsked.map((request) => request.policy)).toEqual(['ask'])
    expect(existsSync(join(strict.dir, 'ran'))).toBe(false)
  })

  it('a continuable child\'s request names it by its record id; its turn goes on once the parent answers', async () => {
    const w = await worker(RUN_IT, {}, true)
    const p = await parent([w.server.url])
    const asked = frontEnd(p, () => ({ decision: 'allow-always', by: 'the test user' }))
    const provider = p.harness.ctx.subagents.getProvider('a2a') as A2aProvider
    const preparation = await provider.prepareContinuable({
      childId: 'researcher-1',
      parent: p.parent,
      descriptor: { version: DESCRIPTOR_VERSION, mode: 'continuable', provider: 'a2a', label: 'researcher' },
      request: { prompt: [text('unused')], parent: p.parent },
      signal: new AbortController().signal,
    })
    if (preparation.kind !== 'remote') throw new Error('an A2A child is remote')
    cleanups.push(() => preparation.conversation.dispose())
    const result = await preparation.conversation.send([text('run it')])
    expect(result.stopReason).toBe('completed')
    expect(asked.map((request) => ({ child: request.child, path: request.path }))).toEqual([{ child: 'researcher-1', path: ['dsh test', 'a2a "researcher"'] }])
    expect(existsSync(join(w.dir, 'ran'))).toBe(true)
  })

  it('without a broker in the parent nobody can be asked: the request is rejected and the command not run', async () => {
    const w = await worker(RUN_IT)
    const p = await parent([w.server.url], false)
    const run = await p.harness.ctx.subagents.start('a2a', p.request('run it'))
    const result = await run.result
    await run.dispose()
    expect(result.stopReason).toBe('completed')
    expect(existsSync(join(w.dir, 'ran'))).toBe(false)
    expect(permissions(w.sessions)).toEqual([expect.objectContaining({ decision: 'reject', by: 'the a2a provider (through the A2A caller)', reason: 'nobody can be asked: the delegating process has no approval broker', source: 'default' })])
  })

  it('a run cancelled while its request waits at the parent\'s broker withdraws it at once; the task is cancelled on the worker and the command never runs', async () => {
    const w = await worker(RUN_IT)
    const p = await parent([w.server.url])
    let withdrawn: unknown
    const asked = frontEnd(p, (_request, signal) => new Promise((resolve) => signal.addEventListener('abort', () => {
      withdrawn = signal.reason
      resolve({ decision: 'allow-once', by: 'too late' })
    })))
    const run = await p.harness.ctx.subagents.start('a2a', p.request('run it'))
    await until(() => asked.length === 1)
    expect(p.harness.ctx.approvals.waitingUnder(run.id)).toHaveLength(1)
    run.cancel()
    const result = await run.result
    await run.dispose()
    expect(result.stopReason).toBe('aborted')
    expect(withdrawn).toBeDefined()
    expect(p.harness.ctx.approvals.pending()).toEqual([])
    await until(() => w.server.taskCount === 0)
    expect(existsSync(join(w.dir, 'ran'))).toBe(false)
    expect(permissions(w.sessions)).toEqual([expect.objectContaining({ decision: 'reject', source: 'cancelled' })])
  })
})

describe('the a2a provider and a plain A2A agent that asks its caller', () => {
  it('an input-required without a dsh approval request ends the run error saying what the agent asked, and the task is cancelled there', async () => {
    let cancelled: string | undefined
    const executor: AgentExecutor = {
      execute: async (request, bus) => {
        const { taskId, contextId } = request
        bus.publish(AgentEvent.task({ id: taskId, contextId, status: { state: TaskState.TASK_STATE_SUBMITTED, message: undefined, timestamp: new Date().toISOString() }, artifacts: [], history: [request.userMessage], metadata: undefined }))
        const question = { messageId: 'q', contextId, taskId, role: 2, parts: [{ content: { $case: 'text' as const, value: 'Which branch should I deploy?' }, metadata: undefined, filename: '', mediaType: 'text/plain' }], metadata: undefined, extensions: [], referenceTaskIds: [] }
        bus.publish(AgentEvent.statusUpdate({ taskId, contextId, status: { state: TaskState.TASK_STATE_INPUT_REQUIRED, message: question, timestamp: new Date().toISOString() }, metadata: undefined }))
      },
      cancelTask: async (taskId, bus) => {
        cancelled = taskId
        bus.publish(AgentEvent.statusUpdate({ taskId, contextId: '', status: { state: TaskState.TASK_STATE_CANCELED, message: undefined, timestamp: new Date().toISOString() }, metadata: undefined }))
      },
    }
    const agent: PlainServer = await sdkAgent(executor)
    cleanups.push(() => agent.close())
    const p = await parent([agent.url])
    const asked = frontEnd(p, () => ({ decision: 'allow-once', by: 'nobody' }))
    const run = await p.harness.ctx.subagents.start('a2a', p.request('deploy'))
    const result = await run.result
    await run.dispose()
    expect(result.stopReason).toBe('error')
    expect(result.diagnostic).toMatch(/asked its caller for input in task \S+ \("Which branch should I deploy\?"\); a delegation has nobody to answer that, so the run ended and the task was cancelled there/)
    expect(asked).toEqual([])
    await until(() => cancelled !== undefined)
    expect(`a2a:${cancelled}`).toBe(run.id)
  })
})
