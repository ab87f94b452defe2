/**
 * The hooks around a call and the bounds on a hook: PostToolUse hears the call's input and
 * result; a hook that hangs is stopped at its timeout with everything it started; a hook
 * that forks and exits leaves nothing behind.
 */
import { existsSync, readFileSync } from 'node:fs'
import { join } from 'node:path'
import { afterEach, describe, expect, it } from 'vitest'
import { exists } from '@dsh/testkit'
import { runHookCommand } from '@dsh/hooks'
import { appendInput, cleanUp, group, inputsIn, runWithHooks, tempDir } from './hooks-harness.js'

afterEach(cleanUp)

/**
 * Whether `pid` still runs: a grandchild whose shell died first is re-parented to PID 1, and
 * an init that never reaps (as in some containers) leaves it a zombie, which holds nothing.
 */
function running(pid: number): boolean {
  if (!exists(pid)) return false
  const stat = readFileSync(`/proc/${pid}/stat`, 'utf8')
  return stat.slice(stat.lastIndexOf(')') + 2)[0] !== 'Z'
}

/** The pid a hook wrote to `file`. */
function pidIn(file: string): number {
  return Number(readFileSync(file, 'utf8').trim())
}

describe('PostToolUse', () => {
  it('runs after the call with its input and response; an audit hook appends a line per call', async () => {
    const dir = await tempDir()
    const audit = appendInput(join(dir, 'audit.jsonl'))
    const run = await runWithHooks(['echo one', 'echo two'], { hooks: { PostToolUse: [group(audit, 'Bash')] } })
    // The hook runs beside the loop: the turn can end before the last line is written.
    await expect.poll(() => inputsIn(join(dir, 'audit.jsonl')).length).toBe(2)
    const lines = inputsIn(join(dir, 'audit.jsonl'))
    expect(lines.map((line) => (line.tool_input as { command: string }).command).sort()).toEqual(['echo one', 'echo two'])
    expect(lines[0]).toMatchObject({ hook_event_name: 'PostToolUse', tool_name: 'bash', agent_id: run.agent.id, tool_response: { is_error: false } })
    expect(JSON.stringify(lines)).toContain('one\\n')
  })
  it('does not run after a call a PreToolUse hook refused', async () => {
    const dir = await tempDir()
    const run = await runWithHooks(['echo refused', 'echo ran'], {
      hooks: { PreToolUse: [group(`grep -q refused && exit 2; exit 0`, 'Bash')], PostToolUse: [group(appendInput(join(dir, 'audit.jsonl')))] },
    })
    expect(run.results.map((result) => result.isError)).toEqual([true, false])
    await expect.poll(() => (existsSync(join(dir, 'audit.jsonl')) ? readFileSync(join(dir, 'audit.jsonl'), 'utf8') : '')).toContain('echo ran')
    expect(readFileSync(join(dir, 'audit.jsonl'), 'utf8')).not.toContain('echo refused')
  })
})

describe('stopping', () => {
  it('a hook still running when the root session is released finishes first (within its timeout): the last call\'s audit line is written before dsh exits', async () => {
    const dir = await tempDir()
    const run = await runWithHooks(['echo last'], { hooks: { PostToolUse: [group(`sleep 0.3; cat > ${dir}/audit.json`)] } })
    await run.harness.dispose()
    expect(JSON.parse(readFileSync(join(dir, 'audit.json'), 'utf8'))).toMatchObject({ tool_input: { command: 'echo last' } })
  })
})

describe('the turn\'s events', () => {
  it('SessionStart, UserPromptSubmit (with the prompt) and Stop fire for a root turn, each with its event name', async () => {
    const dir = await tempDir()
    const record = appendInput(join(dir, 'events.jsonl'))
    const run = await runWithHooks([], { hooks: { SessionStart: [group(record)], UserPromptSubmit: [group(record)], Stop: [group(record)] } })
    const read = () => inputsIn(join(dir, 'events.jsonl'))
    await expect.poll(() => read().length).toBe(3)
    const byEvent = Object.fromEntries(read().map((input) => [input.hook_event_name, input]))
    expect(Object.keys(byEvent).sort()).toEqual(['SessionStart', 'Stop', 'UserPromptSubmit'])
    expect(byEvent.UserPromptSubmit).toMatchObject({ prompt: 'go', agent_id: run.agent.id, session_id: run.agent.id })
    expect(byEvent.SessionStart).toMatchObject({ source: 'startup', agent_path: 'dsh test' })
  })
})

describe('bounds', () => {
  it('a PreToolUse hook past its timeout is stopped with what it started, a note says so, and the call is decided without it', async () => {
    const dir = await tempDir()
    const hang = `sleep 300 & echo $! > ${dir}/child.pid; echo $$ > ${dir}/hook.pid; wait`
    const run = await runWithHooks([`touch ${dir}/ran`], { hooks: { PreToolUse: [group(hang, 'Bash', 0.5)] } })
    expect(run.results[0]!.isError).toBe(false)
    expect(existsSync(join(dir, 'ran'))).toBe(true)
    expect(run.notes).toContainEqual(expect.stringContaining(`PreToolUse hook "${hang}" was stopped at its timeout; no decision`))
    expect(running(pidIn(join(dir, 'hook.pid')))).toBe(false)
    expect(running(pidIn(join(dir, 'child.pid')))).toBe(false)
  })

  it('a hook that forks and exits leaves no process behind', async () => {
    const dir = await tempDir()
    const result = await runHookCommand(`sleep 300 > /dev/null 2>&1 & echo $! > ${dir}/child.pid; exit 0`, {}, { cwd: dir, timeoutMs: 30_000 })
    expect(result).toMatchObject({ exitCode: 0, timedOut: false })
    expect(running(pidIn(join(dir, 'child.pid')))).toBe(false)
  })

  it('a hook whose descendant leaves the group and holds its output open still finishes, with its result', async () => {
    const dir = await tempDir()
    // `setsid` puts the sleep outside the hook's group, so stopping the group does not reach it and it keeps stdout open.
    const result = await runHookCommand(`setsid sleep 30 & echo $! > ${dir}/escaped.pid; exit 0`, {}, { cwd: dir, timeoutMs: 1000 })
    try {
      expect(result).toMatchObject({ exitCode: 0, timedOut: false })
    } finally {
      try {
        process.kill(pidIn(join(dir, 'escaped.pid')), 'SIGKILL')
      } catch {}
    }
  }, 10_000)

  it('a hook gets the allow-listed environment: never a credential of dsh, only what passEnv names', async () => {
    const dir = await tempDir()
    process.env.DSH_HOOKS_TEST_SECRET = 'sk-secret'
    process.env.DSH_HOOKS_TEST_NAMED = 'named'
    try {
      await runHookCommand(`env > ${dir}/env`, {}, { cwd: dir, timeoutMs: 30_000, passEnv: ['DSH_HOOKS_TEST_NAMED'] })
    } finally {
      delete process.env.DSH_HOOKS_TEST_SECRET
      delete process.env.DSH_HOOKS_TEST_NAMED
    }
    const env = readFileSync(join(dir, 'env'), 'utf8')
    expect(env).not.toContain('sk-secret')
    expect(env).toContain('DSH_HOOKS_TEST_NAMED=named')
  })

  it('a hook printing far more than its bound is cut and does not hold the run', async () => {
    const dir = await tempDir()
    const result = await runHookCommand(`head -c 50000000 /dev/zero | tr '\\0' x`, {}, { cwd: dir, timeoutMs: 60_000 })
    expect(result.truncated).toBe(true)
    expect(result.stdout.length).toBe(64 * 1024)
  })

  it('a command that does not exist is a note and no decision', async () => {
    const dir = await tempDir()
    const run = await runWithHooks([`touch ${dir}/ran`], { hooks: { PreToolUse: [group('/nonexistent/dsh-hook-guard')] } })
    expect(existsSync(join(dir, 'ran'))).toBe(true)
    expect(run.notes).toContainEqual(expect.stringMatching(/PreToolUse hook "\/nonexistent\/dsh-hook-guard" exited 127: .*not found; no decision/))
  })
})
