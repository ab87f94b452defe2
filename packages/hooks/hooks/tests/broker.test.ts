/**
 * PreToolUse hooks as the approval broker's verdict source, with real hook processes: they
 * run before a person is asked; a hook's ask is put to the front-end instead of refused;
 * a request a remote child forwarded is decided by the hooks here too, the child named by
 * its path; and the matchers become the askUp rules children in other processes carry.
 */
import { existsSync, readFileSync } from 'node:fs'
import { join } from 'node:path'
import { afterEach, describe, expect, it } from 'vitest'
import type { ApprovalRequestInfo } from '@dsh/approvals'
import { askUpRules, readHooks } from '@dsh/hooks'
import { cleanUp, group, runWithHooks, tempDir } from './hooks-harness.js'

afterEach(cleanUp)

/** A front-end that allows and remembers what it was asked. */
function allowingFrontEnd(asked: ApprovalRequestInfo[]) {
  return { name: 'the test user', ask: async (request: ApprovalRequestInfo) => (asked.push(request), { decision: 'allow-once' as const, by: 'the test user' }) }
}

describe('PreToolUse inside the broker', () => {
  it('a blocking hook decides before a person is asked: the front-end never sees the call', async () => {
    const dir = await tempDir()
    const asked: ApprovalRequestInfo[] = []
    const guard = `grep -q 'rm -rf' && { echo 'no rm -rf' >&2; exit 2; }; exit 0`
    const run = await runWithHooks([`rm -rf ${dir}/x; touch ${dir}/blocked`, `touch ${dir}/ran`], { hooks: { PreToolUse: [group(guard, 'Bash')] } }, { default: 'reject' }, allowingFrontEnd(asked))
    expect(run.results[0]).toEqual({ isError: true, text: expect.stringContaining('no rm -rf') })
    expect(existsSync(join(dir, 'blocked'))).toBe(false)
    expect(asked.map((request) => request.display)).toEqual([`touch ${dir}/ran`])
    expect(existsSync(join(dir, 'ran'))).toBe(true)
  })

  it('a hook that asks puts the call to the front-end, even where a rule allows it, naming the hook and its reason', async () => {
    const dir = await tempDir()
    const asked: ApprovalRequestInfo[] = []
    const ask = `echo '{"hookSpecificOutput":{"permissionDecision":"ask","permissionDecisionReason":"check with a human"}}'`
    const run = await runWithHooks([`touch ${dir}/asked`], { hooks: { PreToolUse: [group(ask)] } }, { allow: ['bash'] }, allowingFrontEnd(asked))
    expect(run.results[0]!.isError).toBe(false)
    expect(existsSync(join(dir, 'asked'))).toBe(true)
    expect(asked).toEqual([expect.objectContaining({ policy: 'ask', rule: `PreToolUse hook "${ask}" (check with a human)` })])
    const permission = run.agent.session.events().flatMap((event) => (event.type === 'tool/result' ? [event.permission] : []))[0]
    expect(permission).toMatchObject({ decision: 'allow-once', by: 'the test user' })
  })

  it("a request a remote child forwards is decided by the hooks here, the child named by its path below the agent", async () => {
    const dir = await tempDir()
    const guard = `cat > ${dir}/input.json; grep -q 'rm -rf' ${dir}/input.json && { echo 'no rm -rf below either' >&2; exit 2; }; exit 0`
    const run = await runWithHooks([], { hooks: { PreToolUse: [group(guard, 'Bash')] } })
    const decision = await run.harness.ctx.approvals.request({
      agent: run.agent,
      tool: 'bash',
      args: { command: 'rm -rf /tmp/x' },
      signal: new AbortController().signal,
      remote: { child: 'acp:remote-1', name: 'acp "deep"', below: ['spawn "grandchild"'], record: false },
    })
    expect(decision).toMatchObject({ decision: 'reject', by: `PreToolUse hook "${guard}"`, reason: 'no rm -rf below either', source: 'rule' })
    const input = JSON.parse(readFileSync(join(dir, 'input.json'), 'utf8')) as Record<string, unknown>
    expect(input).toMatchObject({ tool_name: 'bash', tool_input: { command: 'rm -rf /tmp/x' }, agent_id: 'acp:remote-1', agent_path: 'dsh test/acp "deep"/spawn "grandchild"' })
  })
  it('a read-only call a remote child asks up is decided by the hooks alone: no objection runs it under a reject default, a block refuses it', async () => {
    const guard = `grep -q secret && { echo 'no secrets' >&2; exit 2; }; exit 0`
    const run = await runWithHooks([], { hooks: { PreToolUse: [group(guard, 'Read')] } }, { default: 'reject' })
    const ask = (path: string) =>
      run.harness.ctx.approvals.request({ agent: run.agent, tool: 'read', args: { path }, signal: new AbortController().signal, sideEffect: false, remote: { child: 'acp:remote-1', name: 'acp "deep"', below: [], record: false } })
    expect(await ask('notes.txt')).toMatchObject({ decision: 'allow-once' })
    expect(await ask('secret.txt')).toMatchObject({ decision: 'reject', reason: 'no secrets' })
  })
})

describe('askUpRules', () => {
  const rules = (...matchers: (string | undefined)[]) =>
    askUpRules(readHooks({ PreToolUse: matchers.map((matcher) => group('true', matcher)), PostToolUse: [group('true', 'Write')] }, 'test', () => {}))

  it('names the tools of literal matchers and prefixes, never fewer than a matcher takes', () => {
    expect(rules('Bash', 'Edit|Write', 'mcp__github__.*')).toEqual(['Bash', 'Edit', 'Write', 'mcp__github__*'])
    expect(rules('Bash', undefined)).toEqual(['*'])
    expect(rules('B.sh')).toEqual(['*'])
    expect(rules('(Bash|Read)')).toEqual(['*'])
    expect(rules()).toEqual([])
  })
})

describe('each PreToolUse run in the session', () => {
  it('is a hook/run event of the agent: the command, its exit code, how long it ran, what it decided and the call', async () => {
    const dir = await tempDir()
    const guard = `grep -q 'rm -rf' && { echo 'no rm -rf' >&2; exit 2; }; exit 0`
    const run = await runWithHooks([`rm -rf ${dir}/x`, 'true'], { hooks: { PreToolUse: [group(guard, 'Bash')] } })
    const events = run.agent.session.events()
    const runs = events.flatMap((event) => (event.type === 'hook/run' ? [event] : []))
    const calls = events.flatMap((event) => (event.type === 'tool/call' ? [event.call.id] : []))
    expect(runs).toEqual([
      expect.objectContaining({ event: 'PreToolUse', command: guard, exitCode: 2, decision: 'block', callId: calls[0], durationMs: expect.any(Number) }),
      expect.objectContaining({ event: 'PreToolUse', command: guard, exitCode: 0, callId: calls[1] }),
    ])
    expect(runs[1]!.decision).toBeUndefined()
    // Each run sits between its call and its result.
    const order = events.map((event) => event.type).filter((type) => type === 'tool/call' || type === 'hook/run' || type === 'tool/result')
    expect(order).toEqual(['tool/call', 'hook/run', 'tool/result', 'tool/call', 'hook/run', 'tool/result'])
  })
})
