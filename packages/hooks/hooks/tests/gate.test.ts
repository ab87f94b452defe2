/**
 * PreToolUse through the approval broker (the hooks are its verdict source), with real hook
 * processes and the real bash tool: a block refuses the call and the model reads why; a hook's allow never
 * widens what a rule denies; matchers take dsh's and Claude Code's tool names.
 */
import { existsSync, readFileSync } from 'node:fs'
import { join } from 'node:path'
import { afterEach, describe, expect, it } from 'vitest'
import { cleanUp, group, runWithHooks, tempDir } from './hooks-harness.js'

afterEach(cleanUp)

describe('PreToolUse', () => {
  it('a hook exiting 2 refuses the call, and the model reads its standard error', async () => {
    const dir = await tempDir()
    const guard = `grep -q 'push --force' && { echo 'force pushes are not allowed here' >&2; exit 2; }; exit 0`
    const run = await runWithHooks([`git push --force origin main; touch ${dir}/pushed`, `touch ${dir}/ran`], { hooks: { PreToolUse: [group(guard, 'Bash')] } })
    expect(run.results[0]!.isError).toBe(true)
    expect(run.results[0]!.text).toContain('force pushes are not allowed here')
    expect(existsSync(join(dir, 'pushed'))).toBe(false)
    // The guard did not match the second command: it ran.
    expect(run.results[1]!.isError).toBe(false)
    expect(existsSync(join(dir, 'ran'))).toBe(true)
  })

  it('a JSON deny decision refuses with its reason', async () => {
    const dir = await tempDir()
    const deny = `echo '{"hookSpecificOutput":{"hookEventName":"PreToolUse","permissionDecision":"deny","permissionDecisionReason":"no writes today"}}'`
    const run = await runWithHooks([`touch ${dir}/written`], { hooks: { PreToolUse: [group(deny)] } })
    expect(run.results[0]).toEqual({ isError: true, text: expect.stringContaining('no writes today') })
    expect(existsSync(join(dir, 'written'))).toBe(false)
  })

  it('a hook that allows cannot widen what a deny rule denies', async () => {
    const dir = await tempDir()
    const allow = `echo '{"hookSpecificOutput":{"hookEventName":"PreToolUse","permissionDecision":"allow"}}'`
    const run = await runWithHooks([`touch ${dir}/denied`], { hooks: { PreToolUse: [group(allow, 'Bash')] } }, { default: 'allow', deny: ['bash(touch*)'] })
    expect(run.results[0]!.isError).toBe(true)
    expect(run.results[0]!.text).toContain('bash(touch*)')
    expect(existsSync(join(dir, 'denied'))).toBe(false)
  })

  it('a hook that allows does not answer for the broker: with nobody to ask and a reject default, the call is refused', async () => {
    const dir = await tempDir()
    const allow = `echo '{"decision":"approve"}'`
    const run = await runWithHooks([`touch ${dir}/unasked`], { hooks: { PreToolUse: [group(allow)] } }, { default: 'reject' })
    expect(run.results[0]!.isError).toBe(true)
    expect(existsSync(join(dir, 'unasked'))).toBe(false)
  })

  it('a hook that says ask is refused with nobody to ask, saying so', async () => {
    const dir = await tempDir()
    const ask = `echo '{"hookSpecificOutput":{"permissionDecision":"ask","permissionDecisionReason":"check with a human"}}'`
    const run = await runWithHooks([`touch ${dir}/asked`], { hooks: { PreToolUse: [group(ask)] } })
    expect(run.results[0]).toEqual({ isError: true, text: expect.stringContaining('check with a human') })
    expect(existsSync(join(dir, 'asked'))).toBe(false)
  })

  it('matchers: Claude Code\'s Bash and dsh\'s bash match the bash tool, a pattern as a regular expression, Write|Edit does not', async () => {
    const dir = await tempDir()
    const mark = (name: string) => `cat > /dev/null; echo ${name} >> ${dir}/fired`
    await runWithHooks(['true'], {
      hooks: { PreToolUse: [group(mark('claude'), 'Bash'), group(mark('dsh'), 'bash'), group(mark('regex'), 'ba.*|Read'), group(mark('files'), 'Write|Edit'), group(mark('prefix'), 'Ba'), group(mark('all'))] },
    })
    expect(readFileSync(join(dir, 'fired'), 'utf8').trim().split('\n').sort()).toEqual(['all', 'claude', 'dsh', 'regex'])
  })

  it('the hook reads the event as JSON on standard input, with the agent named', async () => {
    const dir = await tempDir()
    const run = await runWithHooks(['echo hi'], { hooks: { PreToolUse: [group(`cat > ${dir}/input.json`, 'Bash')] } })
    const input = JSON.parse(readFileSync(join(dir, 'input.json'), 'utf8')) as Record<string, unknown>
    expect(input).toMatchObject({
      session_id: run.agent.session.id,
      cwd: run.agent.session.header.cwd,
      hook_event_name: 'PreToolUse',
      tool_name: 'bash',
      tool_input: { command: 'echo hi' },
      agent_id: run.agent.id,
      agent_path: 'dsh test',
    })
  })

  it('output that is not valid JSON is a note naming the hook, and no decision: the call runs', async () => {
    const dir = await tempDir()
    const garbage = `echo '{"decision": "block", oops'`
    const run = await runWithHooks([`touch ${dir}/ran`], { hooks: { PreToolUse: [group(garbage)] } })
    expect(run.results[0]!.isError).toBe(false)
    expect(existsSync(join(dir, 'ran'))).toBe(true)
    expect(run.notes).toContainEqual(expect.stringContaining(`the hooks entry: PreToolUse hook "${garbage}" printed output that is not valid JSON; no decision`))
  })
})
