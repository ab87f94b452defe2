/**
 * A project's hook files are bound to the directories the user trusted, through the built
 * CLI: with projectClaudeSettings / projectCodexHooks set in the user's own config, a
 * project's `.claude/settings.json` or `.codex/hooks.json` runs only in a directory trusted
 * with `dsh trust`, as its bytes were then; elsewhere (or once it changed) it is a note saying
 * how to run it, and nothing of it runs. The trust of one directory never covers another.
 */
import { existsSync, mkdirSync, realpathSync, writeFileSync } from 'node:fs'
import { join } from 'node:path'
import { describe, expect, it } from 'vitest'
import { PROJECT_HOOK_FILES as HOOKS_PACKAGE_FILES } from '@dsh/hooks'
import { PROJECT_HOOK_FILES } from '../src/config-trust.js'
import { runDsh, tempDir } from './cli.js'

/** A user (config, script, home) whose hooks entry asks for both kinds of project hook files. */
function user() {
  const dir = realpathSync(tempDir())
  const config = join(dir, 'config.yml')
  writeFileSync(config, ['- name: "@dsh/hooks"', '  config: { projectClaudeSettings: true, projectCodexHooks: true }', ''].join('\n'))
  const script = join(dir, 'script.yml')
  writeFileSync(script, ['- when: { depth: 0 }', '  reply:', '    - call: { tool: bash, args: { command: "echo hi" } }', '    - text: "done: {{last_tool_result}}"'].join('\n'))
  const env = { DSH_HOME: join(dir, 'home') }
  const run = (cwd: string) => runDsh(['run', '--config', config, '--model', `scripted:${script}`, '--session-dir', join(dir, 'sessions'), '--permission', 'allow', '--quiet', 'go'], { cwd, env, timeoutMs: 60_000 })
  const trust = (cwd: string) => runDsh(['trust'], { cwd, env })
  return { run, trust }
}

/** A project whose `file` (a Claude Code or Codex hook file) has a PreToolUse hook that leaves a mark when it runs. */
function project(file: '.claude/settings.json' | '.codex/hooks.json') {
  const dir = realpathSync(tempDir())
  mkdirSync(join(dir, file, '..'), { recursive: true })
  // The same bytes in every project (a hook runs in the agent's directory): only the directory tells two apart.
  writeFileSync(join(dir, file), JSON.stringify({ hooks: { PreToolUse: [{ matcher: 'Bash', hooks: [{ type: 'command', command: 'touch hook-ran' }] }] } }))
  return { dir, file: join(dir, file), ran: () => existsSync(join(dir, 'hook-ran')) }
}

describe('project hook files run only in directories the user trusted', () => {
  for (const file of ['.claude/settings.json', '.codex/hooks.json'] as const) {
    it(`${file}: untrusted, a note says how to run it and nothing runs; trusted, it runs; a change after the trust is refused again`, async () => {
      const u = user()
      const p = project(file)
      const untrusted = await u.run(p.dir)
      expect(untrusted.code, untrusted.stderr).toBe(0)
      expect(p.ran()).toBe(false)
      expect(untrusted.stderr).toContain(`${p.file} has hooks, which are not run: you have not trusted this directory's hook files, or the file changed since you did; read it, then run \`dsh trust\` in ${p.dir} to run them here`)

      const trusted = await u.trust(p.dir)
      expect(trusted.code, trusted.stderr).toBe(0)
      expect(trusted.stdout).toContain(`dsh: trusted ${p.file}`)
      const ran = await u.run(p.dir)
      expect(ran.code, ran.stderr).toBe(0)
      expect(ran.stderr).not.toContain('has hooks, which are not run')
      expect(p.ran()).toBe(true)

      // A git pull that changes the hooks: asked again.
      writeFileSync(p.file, JSON.stringify({ hooks: { PreToolUse: [{ matcher: 'Bash', hooks: [{ type: 'command', command: `touch ${join(p.dir, 'changed-ran')}` }] }] } }))
      const changed = await u.run(p.dir)
      expect(changed.stderr).toContain(`${p.file} has hooks, which are not run`)
      expect(existsSync(join(p.dir, 'changed-ran'))).toBe(false)
    })
  }

  it('the trust of one directory does not cover another holding the same file, byte for byte', async () => {
    const u = user()
    const trustedProject = project('.claude/settings.json')
    const other = project('.claude/settings.json')
    expect((await u.trust(trustedProject.dir)).code).toBe(0)
    const result = await u.run(other.dir)
    expect(result.code, result.stderr).toBe(0)
    expect(other.ran()).toBe(false)
    expect(result.stderr).toContain(`${other.file} has hooks, which are not run`)
    expect(trustedProject.ran()).toBe(false)
  })

  it('dsh trust records the files @dsh/hooks reads', () => {
    expect([...PROJECT_HOOK_FILES]).toEqual([...HOOKS_PACKAGE_FILES])
  })
})
