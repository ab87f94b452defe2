/**
 * Codex's approvals reach the parent's approval broker (`permissionMode: ask`, the
 * default): the real, pinned `codex app-server` against the fake Responses server, the real
 * broker (`@dsh/approvals`), and a front-end registered on it standing in for the person
 * at the root. Only the model is scripted.
 */
import { existsSync, mkdtempSync, readFileSync } from 'node:fs'
import { tmpdir } from 'node:os'
import { join } from 'node:path'
import { afterEach, describe, expect, it } from 'vitest'
import { text } from '@dsh/llm'
import type { Agent } from '@dsh/agent'
import { ApprovalService, type ApprovalRequestInfo, type FrontEndAnswer } from '@dsh/approvals'
import { SubagentService, type SubagentRequest, type SubagentRun } from '@dsh/subagent'
import { startFakeOpenAIResponses, type FakeOpenAIResponses, type FakeResponsesAnswer } from '@dsh/testkit'
import { createHarness, type Harness } from '@dsh/testkit/harness'
import { CodexPlugin } from '../src/index.js'
import { appServerPids, codexHome, waitFor } from './helpers.js'

let harness: Harness | undefined
let fake: FakeOpenAIResponses | undefined
let parent: Agent
let workdir: string
const runs: SubagentRun[] = []

afterEach(async () => {
  await Promise.all(runs.splice(0).map((run) => run.dispose()))
  await harness?.dispose()
  await fake?.close()
  harness = undefined
  fake = undefined
})

/** The model asks Codex to run `command` (through its exec tool), then answers `done`. */
const commandCall = (command: string, callId = 'call_cmd'): FakeResponsesAnswer => ({ toolCalls: [{ callId, name: 'exec_command', arguments: { cmd: command } }] })

async function setup(answers: FakeResponsesAnswer[], approvals: Partial<ApprovalService.Config> | null = {}, config: Record<string, unknown> = {}) {
  fake = await startFakeOpenAIResponses(answers)
  const home = codexHome(fake.url)
  harness = await createHarness()
  if (approvals !== null) await harness.plugin(ApprovalService, approvals)
  await harness.plugin(SubagentService)
  await harness.plugin(CodexPlugin, { env: { CODEX_HOME: home, HOME: home, FAKE_CODEX_API_KEY: 'sk-fake' }, graceMs: 500, ...config })
  workdir = mkdtempSync(join(tmpdir(), 'dsh-codex-work-'))
  parent = await harness.agent({ meta: { cwd: workdir } })
}

/** A front-end that answers every request with `answer(request)` and keeps what it was asked. */
function frontEnd(answer: (request: ApprovalRequestInfo, signal: AbortSignal) => Promise<FrontEndAnswer> | FrontEndAnswer): ApprovalRequestInfo[] {
  const asked: ApprovalRequestInfo[] = []
  harness!.ctx.approvals.addFrontEnd({
    name: 'the test',
    ask: async (request, signal) => {
      asked.push(request)
      return answer(request, signal)
    },
  })
  return asked
}

async function start(prompt: string, extra: Partial<SubagentRequest> = {}): Promise<SubagentRun> {
  const run = await harness!.ctx.subagents.start('codex', { prompt: [text(prompt)], parent, signal: new AbortController().signal, label: 'make a marker', ...extra })
  runs.push(run)
  return run
}

/** The decisions recorded in the parent's session for its remote child. */
function approvalEvents(agent: Agent) {
  return agent.session.events().flatMap((event) => (event.type === 'approval' ? [event] : []))
}

/** What Codex told the model about the call `callId` in the request after it. */
function callOutput(request: number, callId: string): string | undefined {
  const input = (fake!.requests[request]!.body as { input: { type: string; call_id?: string; output?: string }[] }).input
  return input.find((item) => item.type === 'function_call_output' && item.call_id === callId)?.output
}

describe('codex approvals go to the parent\'s approval broker', () => {
  it('a rejection from the front-end declines the command: it is not run, and the decision is recorded in the parent\'s session naming the child', async () => {
    await setup([commandCall('touch marker.txt'), { text: 'I was not allowed to.' }])
    const asked = frontEnd(() => ({ decision: 'reject', by: 'the test', reason: 'not today' }))
    const run = await start('create marker.txt')
    const result = await run.result
    expect(result).toMatchObject({ stopReason: 'completed', output: [text('I was not allowed to.')] })
    expect(existsSync(join(workdir, 'marker.txt'))).toBe(false)
    // Named as rules name it: the command Codex runs, unwrapped from its `bash -lc`.
    expect(asked).toMatchObject([{ tool: 'bash', subject: 'touch marker.txt', kind: 'execute', child: run.id, path: ['dsh test', 'codex "make a marker"'], callId: 'call_cmd' }])
    expect(approvalEvents(parent)).toMatchObject([
      { request: { path: ['dsh test', 'codex "make a marker"'], tool: 'bash', subject: 'touch marker.txt', child: run.id }, permission: { decision: 'reject', by: 'the test', reason: 'not today', source: 'user' } },
    ])
    expect(result.diagnostic).toBe('declined command "touch marker.txt" (the test: not today)')
    expect(callOutput(1, 'call_cmd')).toMatch(/rejected/)
  })

  it('an allowing front-end lets the command run', async () => {
    await setup([commandCall('touch marker.txt'), { text: 'done' }])
    const asked = frontEnd(() => ({ decision: 'allow-once', by: 'the test' }))
    const run = await start('create marker.txt')
    expect(await run.result).toMatchObject({ stopReason: 'completed', output: [text('done')] })
    expect(run.id).toMatch(/^codex:/)
    expect(existsSync(join(workdir, 'marker.txt'))).toBe(true)
    expect(asked).toHaveLength(1)
    expect(approvalEvents(parent)).toMatchObject([{ request: { tool: 'bash', subject: 'touch marker.txt', child: run.id }, permission: { decision: 'allow-once', source: 'user' } }])
  })

  it('a rule of the broker (allow: ["bash(echo *)"]) lets the command through with nobody asked; one chained to another command is still asked', async () => {
    await setup([commandCall('echo ran-by-rule', 'call_echo'), commandCall('echo x; touch chained.txt', 'call_chained'), { text: 'done' }], { allow: ['bash(echo *)'] })
    const asked = frontEnd(() => ({ decision: 'reject', by: 'the test', reason: 'the front-end was asked' }))
    const run = await start('echo things')
    expect(await run.result).toMatchObject({ stopReason: 'completed' })
    expect(callOutput(1, 'call_echo')).toContain('ran-by-rule')
    // The rule allows echo, not the touch chained after it: that was asked, and rejected.
    expect(asked.map((request) => request.subject)).toEqual(['echo x; touch chained.txt'])
    expect(existsSync(join(workdir, 'chained.txt'))).toBe(false)
    expect(callOutput(2, 'call_chained')).toMatch(/rejected/)
    expect(approvalEvents(parent).map((event) => [event.request.subject, event.permission.decision, event.permission.source, event.permission.rule])).toEqual([
      ['echo ran-by-rule', 'allow-once', 'rule', 'bash(echo *) (config)'],
      ['echo x; touch chained.txt', 'reject', 'user', undefined],
    ])
  })

  it('cancelling the delegation while the request is pending withdraws it: rejected at the broker, and nothing runs', async () => {
    await setup([commandCall('touch marker.txt'), { text: 'never' }])
    let withdrawn: AbortSignal | undefined
    frontEnd(
      (_request, signal) =>
        new Promise<FrontEndAnswer>((resolve) => {
          withdrawn = signal
          // A person who never answers; the answer that comes once it is withdrawn is ignored.
          signal.addEventListener('abort', () => resolve({ decision: 'allow-once', by: 'too late' }), { once: true })
        }),
    )
    const controller = new AbortController()
    const run = await start('create marker.txt', { signal: controller.signal })
    await waitFor(() => harness!.ctx.approvals.pending().length === 1, 'the pending approval')
    expect(harness!.ctx.approvals.waitingUnder(run.id)).toHaveLength(1)
    controller.abort()
    expect((await run.result).stopReason).toBe('aborted')
    expect(withdrawn?.aborted).toBe(true)
    expect(harness!.ctx.approvals.pending()).toEqual([])
    expect(approvalEvents(parent)).toMatchObject([{ request: { subject: 'touch marker.txt', child: run.id }, permission: { decision: 'reject', source: 'cancelled' } }])
    await run.dispose()
    expect(existsSync(join(workdir, 'marker.txt'))).toBe(false)
    expect(appServerPids()).toEqual([])
  })

  it('"always" is remembered by the broker, not by Codex: the same command asked again is answered without the front-end', async () => {
    await setup([commandCall('touch again.txt', 'call_1'), commandCall('touch again.txt', 'call_2'), { text: 'done' }])
    const asked = frontEnd(() => ({ decision: 'allow-always', by: 'the test' }))
    const run = await start('touch it twice')
    expect(await run.result).toMatchObject({ stopReason: 'completed' })
    // Codex was told `accept` (this request only), so it asked about the second call too.
    expect(asked).toHaveLength(1)
    expect(approvalEvents(parent).map((event) => event.permission.source)).toEqual(['user', 'remembered'])
    expect(callOutput(2, 'call_2')).toContain('Process exited with code 0')
  })

  it('a file change is asked about as an edit of each file it writes, by absolute path', async () => {
    const patch = ['apply_patch <<\'EOF\'', '*** Begin Patch', '*** Add File: allowed.txt', '+yes', '*** Add File: refused.txt', '+no', '*** End Patch', 'EOF', ''].join('\n')
    await setup([commandCall(patch), { text: 'done' }])
    const asked = frontEnd((request) => (request.subject.endsWith('refused.txt') ? { decision: 'reject', by: 'the test', reason: 'not that one' } : { decision: 'allow-once', by: 'the test' }))
    const run = await start('write two files')
    const result = await run.result
    expect(asked.map((request) => [request.tool, request.subject, request.kind])).toEqual([
      ['edit', join(workdir, 'allowed.txt'), 'edit'],
      ['edit', join(workdir, 'refused.txt'), 'edit'],
    ])
    // One file refused declines the whole change: neither is written.
    expect(existsSync(join(workdir, 'allowed.txt'))).toBe(false)
    expect(existsSync(join(workdir, 'refused.txt'))).toBe(false)
    expect(result.diagnostic).toContain(`declined file change "${join(workdir, 'allowed.txt')}, ${join(workdir, 'refused.txt')}" (the test: not that one)`)
  })

  it('an allowed file change is written', async () => {
    const patch = ['apply_patch <<\'EOF\'', '*** Begin Patch', '*** Add File: hello.txt', '+hi', '*** End Patch', 'EOF', ''].join('\n')
    await setup([commandCall(patch), { text: 'done' }], { allow: [`edit(${tmpdir()}/*)`] })
    const asked = frontEnd(() => ({ decision: 'reject', by: 'the test', reason: 'the front-end was asked' }))
    const run = await start('write hello.txt')
    expect(await run.result).toMatchObject({ stopReason: 'completed' })
    expect(asked).toEqual([])
    expect(readFileSync(join(workdir, 'hello.txt'), 'utf8')).toBe('hi\n')
  })

  it('with no broker composed, ask declines, as decline does', async () => {
    await setup([commandCall('touch marker.txt'), { text: 'I was not allowed to.' }], null)
    const run = await start('create marker.txt')
    const result = await run.result
    expect(result.diagnostic).toBe('declined command "touch marker.txt"')
    expect(existsSync(join(workdir, 'marker.txt'))).toBe(false)
  })

  it('permissionMode decline answers here even with a broker: nobody is asked', async () => {
    await setup([commandCall('touch marker.txt'), { text: 'I was not allowed to.' }], {}, { permissionMode: 'decline' })
    const asked = frontEnd(() => ({ decision: 'allow-once', by: 'the test' }))
    const run = await start('create marker.txt')
    expect((await run.result).diagnostic).toBe('declined command "touch marker.txt"')
    expect(asked).toEqual([])
    expect(approvalEvents(parent)).toEqual([])
    expect(existsSync(join(workdir, 'marker.txt'))).toBe(false)
  })
})
