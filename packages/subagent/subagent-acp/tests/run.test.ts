import { mkdtempSync, realpathSync } from 'node:fs'
import { tmpdir } from 'node:os'
import { join } from 'node:path'
import { afterEach, describe, expect, it, vi } from 'vitest'
import { text, textOf } from '@dsh/llm'
import { fixture, isAlive, liveChildren, setup, waitFor, type Setup } from './helpers.js'

let current: Setup | undefined
afterEach(async () => {
  await current?.harness.dispose()
  current = undefined
})

async function provider(mode: string, config: Record<string, unknown> = {}, parentCwd?: string): Promise<Setup> {
  current = await setup({ command: process.execPath, args: [fixture('agent.mjs'), mode], ...config }, parentCwd)
  return current
}

/** The one child this test process started since `before`. */
async function newChild(before: readonly number[]): Promise<number> {
  return waitFor(() => liveChildren().find((pid) => !before.includes(pid)))
}

describe('acp: a run against a real ACP agent process', () => {
  it('folds agent_message_chunk text into the output, ignores _-prefixed notifications, and leaves no process', async () => {
    const { harness, request } = await provider('echo')
    const before = liveChildren()
    // The SDK logs what it cannot parse: an ignored extension must not even be logged.
    const logged = vi.spyOn(console, 'error')
    const run = await harness.ctx.subagents.start('acp', request('what is 6 x 7?'))
    expect(run.local).toBe(false)
    // One child-id format for every out-of-process provider: <provider>:<the agent's session id>.
    expect(run.id).toMatch(/^acp:fixture-\d+$/)
    expect(harness.ctx.agents.get(run.id)).toBeUndefined()
    expect(await run.result).toEqual({ output: [text('echo: what is 6 x 7?')], stopReason: 'completed' })
    await run.dispose()
    expect(liveChildren()).toEqual(before)
    expect(logged).not.toHaveBeenCalled()
    logged.mockRestore()
  })

  it('runs in the parent session\'s cwd by default and hands the same cwd to session/new', async () => {
    const cwd = realpathSync(mkdtempSync(join(tmpdir(), 'acp-cwd-')))
    const { harness, request } = await provider('env', {}, cwd)
    const run = await harness.ctx.subagents.start('acp', request('env'))
    const report = JSON.parse(textOf((await run.result).output)) as Record<string, string | null>
    expect(report.cwd).toBe(cwd)
    expect(report.sessionCwd).toBe(cwd)
    await run.dispose()
  })

  it('a configured cwd wins over the parent\'s', async () => {
    const cwd = realpathSync(mkdtempSync(join(tmpdir(), 'acp-cwd-')))
    const { harness, request } = await provider('env', { cwd })
    const run = await harness.ctx.subagents.start('acp', request('env'))
    expect(JSON.parse(textOf((await run.result).output))).toMatchObject({ cwd, sessionCwd: cwd })
    await run.dispose()
  })

  it('the child environment is the base allow-list plus the configured env: other parent variables stay behind', async () => {
    process.env.DSH_TEST_SECRET_TOKEN = 'hunter2'
    process.env.dsh_test_password = 'hunter3'
    process.env.DSH_TEST_PLAIN = 'visible'
    try {
      const { harness, request } = await provider('env', { env: { DSH_TEST_CONFIGURED: 'from config', DSH_TEST_GIVEN_KEY: 'deliberate' } })
      const run = await harness.ctx.subagents.start('acp', request('env'))
      expect(JSON.parse(textOf((await run.result).output))).toMatchObject({
        secret: null,
        password: null,
        plain: null,
        configured: 'from config',
        configuredKey: 'deliberate',
      })
      await run.dispose()
    } finally {
      delete process.env.DSH_TEST_SECRET_TOKEN
      delete process.env.dsh_test_password
      delete process.env.DSH_TEST_PLAIN
    }
  })

  it('passEnv hands the named parent variables to the agent and no others', async () => {
    process.env.DSH_TEST_GIVEN_KEY = 'the key'
    process.env.DSH_TEST_SECRET_TOKEN = 'hunter2'
    try {
      const { harness, request } = await provider('env', { passEnv: ['DSH_TEST_GIVEN_KEY', 'DSH_TEST_UNSET_NAME'] })
      const run = await harness.ctx.subagents.start('acp', request('env'))
      const seen = JSON.parse(textOf((await run.result).output)) as Record<string, unknown>
      expect(seen).toMatchObject({ configuredKey: 'the key', secret: null, configured: null })
      await run.dispose()
    } finally {
      delete process.env.DSH_TEST_GIVEN_KEY
      delete process.env.DSH_TEST_SECRET_TOKEN
    }
  })

  it.each([
    ['max_tokens', 'max-tokens'],
    ['refusal', 'refusal'],
    ['max_turn_requests', 'error'],
  ])('stop reason %s maps to %s, with the partial output and a diagnostic', async (acpReason, stopReason) => {
    const { harness, request } = await provider('stop')
    const run = await harness.ctx.subagents.start('acp', request(acpReason))
    expect(await run.result).toEqual({ output: [text('partial')], stopReason, diagnostic: expect.stringContaining(`"${acpReason}"`) })
    await run.dispose()
  })

  it('an error answer to session/prompt settles error with the agent\'s message', async () => {
    const { harness, request } = await provider('error')
    const run = await harness.ctx.subagents.start('acp', request('x'))
    expect(await run.result).toMatchObject({ stopReason: 'error', output: [], diagnostic: expect.stringContaining('the fixture model is overloaded') })
    await run.dispose()
  })

  it('requesting agentOptions.model is refused before anything is spawned', async () => {
    const { harness, request } = await provider('echo')
    const before = liveChildren()
    await expect(harness.ctx.subagents.start('acp', request('x', { agentOptions: { model: 'deepseek:deepseek-chat' } }))).rejects.toMatchObject({
      code: 'INVALID_REQUEST',
      message: expect.stringContaining('--model'),
    })
    expect(liveChildren()).toEqual(before)
  })

  it('start-time features other than the depth bound are refused by the service', async () => {
    const { harness, request } = await provider('echo')
    const acp = harness.ctx.subagents.getProvider('acp')!
    // Its own directory it can have (session/new's cwd); its commands it confines itself, or not.
    expect(acp.capabilities).toEqual({ outputSchema: false, depthLimit: true, toolFilter: false, persona: false, workspace: true, sandbox: false })
    expect(acp.inheritsParentContext).toBe(false)
    await expect(harness.ctx.subagents.start('acp', request('x', { persona: 'a pirate' }))).rejects.toMatchObject({ code: 'UNSUPPORTED_CAPABILITY' })
    await expect(harness.ctx.subagents.start('acp', request('x', { toolFilter: { allow: ['read'] } }))).rejects.toMatchObject({ code: 'UNSUPPORTED_CAPABILITY' })
    await expect(harness.ctx.subagents.start('acp', request('x', { sandbox: true }))).rejects.toMatchObject({ code: 'UNSUPPORTED_CAPABILITY', message: expect.stringContaining('sandbox') })
  })

  it('a delegation beyond maxDepth is refused with DEPTH_LIMIT before anything is spawned', async () => {
    const { harness, request } = await provider('echo')
    const before = liveChildren()
    await expect(harness.ctx.subagents.start('acp', request('x', { maxDepth: 0 }))).rejects.toMatchObject({ code: 'DEPTH_LIMIT', message: expect.stringContaining('maxDepth 0') })
    expect(liveChildren()).toEqual(before)
  })

  it('a disposed parent cannot delegate: PARENT_DISPOSED and no process is started', async () => {
    const { harness, parent, request } = await provider('echo')
    const before = liveChildren()
    await parent.dispose()
    await expect(harness.ctx.subagents.getProvider('acp')!.start(request('x'))).rejects.toMatchObject({ code: 'PARENT_DISPOSED' })
    expect(liveChildren()).toEqual(before)
  })

  it('the lineage in session/new carries the child\'s depth and the depth bound', async () => {
    const { harness, parent, request } = await provider('meta')
    const run = await harness.ctx.subagents.start('acp', request('x', { maxDepth: 3, label: 'look around' }))
    expect(JSON.parse(textOf((await run.result).output))).toEqual({
      dsh: { parentSession: parent.id, delegationDepth: parent.depth + 1, provider: 'acp', label: 'look around', maxDepth: 3 },
    })
    await run.dispose()
  })
})

describe('acp: permission requests follow the configured policy', () => {
  const options = [
    { optionId: 'yes', name: 'Allow', kind: 'allow_once' },
    { optionId: 'always', name: 'Always allow', kind: 'allow_always' },
    { optionId: 'no', name: 'Reject', kind: 'reject_once' },
  ]

  it('reject (the default) picks the first reject option', async () => {
    const { harness, request } = await provider('permission')
    const run = await harness.ctx.subagents.start('acp', request(JSON.stringify(options)))
    expect(JSON.parse(textOf((await run.result).output))).toEqual({ outcome: 'selected', optionId: 'no' })
    await run.dispose()
  })

  it('reject with no reject option answers cancelled, never an allow', async () => {
    const { harness, request } = await provider('permission')
    const run = await harness.ctx.subagents.start('acp', request(JSON.stringify(options.slice(0, 2))))
    expect(JSON.parse(textOf((await run.result).output))).toEqual({ outcome: 'cancelled' })
    await run.dispose()
  })

  it('allow picks the first allow option', async () => {
    const { harness, request } = await provider('permission', { permission: 'allow' })
    const run = await harness.ctx.subagents.start('acp', request(JSON.stringify([options[2], ...options.slice(0, 2)])))
    expect(JSON.parse(textOf((await run.result).output))).toEqual({ outcome: 'selected', optionId: 'yes' })
    await run.dispose()
  })
})

describe('acp: cancellation, timeouts and crashes after publication', () => {
  it('cancel() mid-turn sends session/cancel: the result is aborted with the partial output, and no process remains', async () => {
    const { harness, request } = await provider('hang')
    const before = liveChildren()
    const run = await harness.ctx.subagents.start('acp', request('x'))
    const pid = await newChild(before)
    await new Promise((resolve) => setTimeout(resolve, 200))
    run.cancel()
    const result = await run.result
    expect(result.stopReason).toBe('aborted')
    expect(textOf(result.output)).toBe(`working pid=${pid}`)
    await run.dispose()
    expect(isAlive(pid)).toBe(false)
    expect(() => process.kill(pid, 0)).toThrow(expect.objectContaining({ code: 'ESRCH' }))
  })

  it('aborting the request signal after publication ends the run aborted', async () => {
    const { harness, request } = await provider('hang')
    const controller = new AbortController()
    const run = await harness.ctx.subagents.start('acp', request('x', { signal: controller.signal }))
    controller.abort()
    expect((await run.result).stopReason).toBe('aborted')
    await run.dispose()
  })

  it('an agent that never confirms session/cancel is settled aborted after cancelGraceMs', async () => {
    const { harness, request } = await provider('ignore-cancel', { cancelGraceMs: 300 })
    const run = await harness.ctx.subagents.start('acp', request('x'))
    run.cancel()
    expect(await run.result).toMatchObject({ stopReason: 'aborted', diagnostic: expect.stringContaining('did not confirm session/cancel within cancelGraceMs (300 ms)') })
    await run.dispose()
  })

  it('timeoutMs settles error with a diagnostic and reaps the agent without waiting for dispose', async () => {
    const { harness, request } = await provider('ignore-cancel', { timeoutMs: 800 })
    const before = liveChildren()
    const started = Date.now()
    const run = await harness.ctx.subagents.start('acp', request('x'))
    const pid = await newChild(before)
    const result = await run.result
    expect(result).toMatchObject({ stopReason: 'error', output: [text(`working pid=${pid}`)], diagnostic: expect.stringContaining('did not finish within timeoutMs (800 ms)') })
    expect(Date.now() - started).toBeLessThan(5000)
    await waitFor(() => (isAlive(pid) ? undefined : true))
    await run.dispose()
  })

  it('a crash mid-turn settles error naming the stage, the exit code and the stderr tail', async () => {
    const { harness, request } = await provider('crash')
    const run = await harness.ctx.subagents.start('acp', request('x'))
    const result = await run.result
    expect(result.stopReason).toBe('error')
    expect(result.output).toEqual([text('about to fail')])
    expect(result.diagnostic).toContain('exited with code 3 during session/prompt')
    expect(result.diagnostic).toContain('fatal: the fixture lost its mind')
    await run.dispose()
  })

  it('the child killed with SIGKILL mid-turn settles error naming the signal', async () => {
    const { harness, request } = await provider('hang')
    const before = liveChildren()
    const run = await harness.ctx.subagents.start('acp', request('x'))
    const pid = await newChild(before)
    process.kill(pid, 'SIGKILL')
    expect(await run.result).toMatchObject({ stopReason: 'error', diagnostic: expect.stringContaining('was killed by SIGKILL during session/prompt') })
    await run.dispose()
  })
})

describe('acp: dispose', () => {
  it('is idempotent and reaps the whole process group, grandchildren included', async () => {
    const { harness, request } = await provider('grandchild')
    const run = await harness.ctx.subagents.start('acp', request('x'))
    const result = await run.result
    const grandchild = Number(/grandchild=(\d+)/.exec(textOf(result.output))![1])
    expect(isAlive(grandchild)).toBe(true)
    const first = run.dispose()
    expect(run.dispose()).toBe(first)
    await first
    expect(isAlive(grandchild)).toBe(false)
  })

  it('escalates to SIGTERM and then SIGKILL for an agent that outlives its stdin and ignores SIGTERM', async () => {
    const { harness, request } = await provider('stubborn', { stdinGraceMs: 200, termGraceMs: 200 })
    const before = liveChildren()
    const run = await harness.ctx.subagents.start('acp', request('x'))
    const pid = await newChild(before)
    expect((await run.result).stopReason).toBe('completed')
    const started = Date.now()
    await run.dispose()
    expect(Date.now() - started).toBeGreaterThanOrEqual(400)
    expect(isAlive(pid)).toBe(false)
  })

  it('dispose during the turn cancels it: the result settles aborted', async () => {
    const { harness, request } = await provider('hang')
    const run = await harness.ctx.subagents.start('acp', request('x'))
    await run.dispose()
    expect((await run.result).stopReason).toBe('aborted')
  })
})
