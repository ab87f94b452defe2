/**
 * The sandbox and dsh's own git, through the built CLI on a real repository, with real
 * bubblewrap: a confined child in the parent's repository tries to plant a hook and a
 * file-system monitor for dsh's unconfined git to run at the next worktree; and a sandboxed
 * bash tool started in `/` is refused rather than run with the whole file system writable.
 */
import { execFileSync } from 'node:child_process'
import { existsSync, mkdirSync, readdirSync, readFileSync, writeFileSync } from 'node:fs'
import { join } from 'node:path'
import { beforeAll, describe, expect, it } from 'vitest'
import { sandboxProblem } from '@dsh/bash'
import { runDsh, tempDir } from './cli.js'

const GIT_ENV = { GIT_AUTHOR_NAME: 'test', GIT_AUTHOR_EMAIL: 'test@localhost', GIT_COMMITTER_NAME: 'test', GIT_COMMITTER_EMAIL: 'test@localhost' }
const git = (cwd: string, ...args: string[]) => execFileSync('git', ['-c', 'core.hooksPath=/dev/null', '-c', 'core.fsmonitor=false', ...args], { cwd, env: { ...process.env, ...GIT_ENV }, encoding: 'utf8' })

beforeAll(() => {
  expect(sandboxProblem(), 'these tests run commands under bubblewrap: npm test\'s preflight (scripts/preflight.mjs) installs it').toBeUndefined()
})

describe('a confined child and the repository it works in, through dsh run', () => {
  it("cannot plant a hook or a file-system monitor in the shared repository's .git, and nothing runs when the parent next makes a worktree and merges it", async () => {
    const dir = tempDir()
    const repo = join(dir, 'repo')
    mkdirSync(repo)
    git(repo, 'init', '--quiet', '-b', 'main')
    writeFileSync(join(repo, 'notes.txt'), 'one\n')
    git(repo, 'add', '.')
    git(repo, 'commit', '--quiet', '-m', 'start')
    const home = join(dir, 'home')
    mkdirSync(home)
    const ran = join(dir, 'ran')
    const config = join(dir, 'dsh.yml')
    writeFileSync(config, [
      '- id: workspaces',
      '  name: "@dsh/workspaces"',
      '- id: tool-workspace',
      '  name: "@dsh/tool-workspace"',
      '- id: tool-subagent-confined',
      '  name: "@dsh/tool-subagent"',
      '  config: { provider: spawn, toolName: subagent_confined, sandbox: no-network }',
      '- id: tool-subagent-worktree',
      '  name: "@dsh/tool-subagent"',
      '  config: { provider: spawn, toolName: subagent_worktree, workspace: worktree }',
    ].join('\n'))
    const plant = [
      `printf '#!/bin/sh\\ntouch ${ran}-hook\\n' > .git/hooks/post-checkout && chmod +x .git/hooks/post-checkout && printf \'%s-%s\\n\' planted hook`,
      `printf '#!/bin/sh\\ntouch ${ran}-fsmonitor\\n' > fsmonitor.sh && chmod +x fsmonitor.sh && git config core.fsmonitor $PWD/fsmonitor.sh && printf \'%s-%s\\n\' planted monitor`,
      "echo edited >> notes.txt && printf '%s-%s\\n' edited notes",
    ].join('; ')
    const script = join(dir, 'script.yml')
    writeFileSync(script, [
      '- when: { prompt: "plant" }',
      '  reply:',
      `    - call: { tool: bash, args: { command: ${JSON.stringify(`${plant} 2>&1`)} } }`,
      '    - text: "planted: {{last_tool_result}}"',
      '- when: { prompt: "work" }',
      '  reply:',
      '    - call: { tool: bash, args: { command: "echo two >> notes.txt" } }',
      '    - text: "worked"',
      '- when: { depth: 0 }',
      '  reply:',
      '    - call: { tool: subagent_confined, args: { description: planter, prompt: "plant" } }',
      // What the confined child changed in the shared tree is put back, so the worktree can start from a clean tree.
      '    - call: { tool: bash, args: { command: "git checkout -- notes.txt && rm -f fsmonitor.sh && git status --short" } }',
      '    - call: { tool: subagent_worktree, args: { description: worker, prompt: "work" } }',
      '    - call: { tool: workspace, args: { action: merge, subagent_id: worker } }',
      '    - text: "merged: {{last_tool_result}}"',
    ].join('\n'))
    const result = await runDsh(['run', '--config', config, '--permission', 'allow', '--model', `scripted:${script}`, '--session-dir', join(home, 'sessions'), 'go'], { cwd: repo, env: { DSH_HOME: home, ...GIT_ENV }, timeoutMs: 90_000 })
    expect(result.code, result.stderr).toBe(0)
    const logs = readdirSync(join(home, 'sessions')).map((name) => readFileSync(join(home, 'sessions', name), 'utf8')).join('\n')
    // The child could edit the tree it shares, but not the repository's git data.
    expect(logs).toContain('edited-notes')
    expect(logs).not.toMatch(/planted-hook|planted-monitor/)
    expect(logs).toMatch(/\.git\/hooks\/post-checkout: Read-only file system/)
    expect(result.stdout).toMatch(/merged: .*merged dsh\/worker/)
    expect(readFileSync(join(repo, 'notes.txt'), 'utf8')).toBe('one\ntwo\n')
    expect(existsSync(join(repo, '.git', 'hooks', 'post-checkout'))).toBe(false)
    expect(git(repo, 'config', '--list', '--local')).not.toContain('fsmonitor')
    expect(existsSync(`${ran}-hook`)).toBe(false)
    expect(existsSync(`${ran}-fsmonitor`)).toBe(false)
  })
})

describe('a sandboxed bash tool started in /, through dsh run', () => {
  it('refuses each command in one line naming / and why, and runs nothing', async () => {
    const dir = tempDir()
    const config = join(dir, 'dsh.yml')
    writeFileSync(config, ['- id: tool-bash', '  name: "@dsh/tool-bash"', '  config: { sandbox: true }'].join('\n'))
    const marker = join(dir, 'escaped')
    const script = join(dir, 'script.yml')
    writeFileSync(script, ['- reply:', `    - call: { tool: bash, args: { command: "touch ${marker}" } }`, '    - text: "said: {{last_tool_result}}"'].join('\n'))
    const result = await runDsh(['run', '--permission', 'allow', '--config', config, '--model', `scripted:${script}`, '--session-dir', join(dir, 'sessions'), 'go'], { cwd: '/', env: { DSH_HOME: dir }, timeoutMs: 60_000 })
    expect(result.code, result.stderr).toBe(0)
    expect(result.stdout).toContain('said: bash failed: a sandboxed command cannot run with / writable (its working directory, usually): it is or holds /proc, /dev, /tmp, /sys, /run, which the sandbox replaces with its own or keeps read-only; run dsh from a project directory instead')
    expect(existsSync(marker)).toBe(false)
  })
})
