/**
 * `permission: allow` never widens what a task a dsh parent delegated may do: where the
 * task's lineage (`metadata.dsh`) does not say its root allows what no rule decides, the
 * request is rejected saying what to configure (the caller may not approve its own side
 * effects), or, when the worker trusts its callers, asked of the caller through
 * input-required. A task with no lineage (a client that is not dsh), and one whose root
 * allows, are still allowed. Real parts: the SDK's client over HTTP, the real bash tool,
 * the real broker.
 */
import { existsSync, mkdtempSync, realpathSync } from 'node:fs'
import { tmpdir } from 'node:os'
import { join } from 'node:path'
import { afterEach, describe, expect, it } from 'vitest'
import { TaskState } from '@a2a-js/sdk'
import { ApprovalService } from '@dsh/approvals'
import { BashService } from '@dsh/bash'
import { BashToolPlugin } from '@dsh/tool-bash'
import type { A2aServerOptions } from '@dsh/a2a-server'
import { LINEAGE_BOUNDS_ALLOW } from '../src/approvals.js'
import type { Script } from '@dsh/llm-scripted'
import type { Session } from '@dsh/session'
import { finalState, sdkClient, startWorker, streamAll, userMessage, type Worker } from './helpers.js'

const started: Worker[] = []
afterEach(async () => {
  await Promise.all(started.splice(0).map((worker) => worker.dispose()))
})

const RUN_IT: Script = [{ reply: [{ call: { tool: 'bash', args: { command: 'touch ran' } } }, { text: 'after: {{last_tool_result}}' }] }]

/** A worker under `--permission allow` whose task runs a real command in `dir`. */
async function allowingWorker(server: A2aServerOptions = {}): Promise<Worker & { dir: string }> {
  const dir = realpathSync(mkdtempSync(join(tmpdir(), 'a2a-lineage-allow-')))
  const worker = await startWorker(RUN_IT, { cwd: dir, permission: 'allow', ...server }, async (harness) => {
    await harness.plugin(ApprovalService, {})
    await harness.plugin(BashService)
    await harness.plugin(BashToolPlugin)
  })
  started.push(worker)
  return Object.assign(worker, { dir })
}

/** The lineage a dsh parent sends, with its root's default when it says one. */
const lineage = (approvalDefault?: 'allow' | 'reject') => ({ dsh: { parentSession: 'the-root', delegationDepth: 1, provider: 'a2a', ...(approvalDefault && { approvalDefault }) } })

function permissions(session: Session): unknown[] {
  return session.events().flatMap((event) => (event.type === 'tool/result' && event.permission ? [event.permission] : []))
}

describe('dsh a2a serve --permission allow under a dsh lineage', () => {
  it('a task whose root rejects what no rule decides runs nothing, and the reason names the flags; without a lineage the same command runs', async () => {
    const w = await allowingWorker()
    const events = await streamAll(await sdkClient(w.server.url), userMessage('run it', lineage('reject')))
    expect(events.some(({ payload }) => payload?.$case === 'statusUpdate' && payload.value.status?.state === TaskState.TASK_STATE_INPUT_REQUIRED)).toBe(false)
    expect(finalState(events)).toBe(TaskState.TASK_STATE_COMPLETED)
    expect(existsSync(join(w.dir, 'ran'))).toBe(false)
    expect(permissions(w.sessions[0]!)).toEqual([{ decision: 'reject', by: 'dsh a2a serve', source: 'default', reason: LINEAGE_BOUNDS_ALLOW, at: expect.any(Number) }])
    expect(LINEAGE_BOUNDS_ALLOW).toMatch(/--trust-caller-approvals.*--approver-token-env NAME/)

    expect(finalState(await streamAll(await sdkClient(w.server.url), userMessage('run it')))).toBe(TaskState.TASK_STATE_COMPLETED)
    expect(existsSync(join(w.dir, 'ran'))).toBe(true)
  })

  it('a lineage that does not say (an older dsh parent) is bounded the same way; one whose root allows runs the command', async () => {
    const older = await allowingWorker()
    await streamAll(await sdkClient(older.server.url), userMessage('run it', lineage()))
    expect(existsSync(join(older.dir, 'ran'))).toBe(false)
    expect(permissions(older.sessions[0]!)).toEqual([expect.objectContaining({ decision: 'reject', reason: LINEAGE_BOUNDS_ALLOW })])

    const allowed = await allowingWorker()
    await streamAll(await sdkClient(allowed.server.url), userMessage('run it', lineage('allow')))
    expect(existsSync(join(allowed.dir, 'ran'))).toBe(true)
    expect(permissions(allowed.sessions[0]!)).toEqual([expect.objectContaining({ decision: 'allow-once', by: 'dsh a2a serve --permission allow', source: 'default' })])
  })

  it('with --trust-caller-approvals the caller is asked through input-required, and its no is not run', async () => {
    const w = await allowingWorker({ trustCallerApprovals: true })
    const client = await sdkClient(w.server.url)
    const first = await streamAll(client, userMessage('run it', lineage('reject')))
    expect(finalState(first)).toBe(TaskState.TASK_STATE_INPUT_REQUIRED)
    const taskId = first.flatMap(({ payload }) => (payload?.$case === 'task' ? [payload.value.id] : []))[0]!
    const answered = await streamAll(client, { ...userMessage('no'), taskId })
    expect(finalState(answered)).toBe(TaskState.TASK_STATE_COMPLETED)
    expect(existsSync(join(w.dir, 'ran'))).toBe(false)
    expect(permissions(w.sessions[0]!)).toEqual([expect.objectContaining({ decision: 'reject', by: 'the A2A caller', source: 'user' })])
  })
})
