/**
 * Kept workspaces made the real way, for the `dsh workspaces` verb tests: a real git
 * repository and a `dsh run` whose children edit in worktrees of their own and leave what
 * they did uncommitted, the parent merging nothing.
 */
import { execFileSync } from 'node:child_process'
import { mkdirSync, writeFileSync } from 'node:fs'
import { join } from 'node:path'
import { expect } from 'vitest'
import { runDsh, tempDir } from './cli.js'

export const GIT_ENV = { GIT_AUTHOR_NAME: 'test', GIT_AUTHOR_EMAIL: 'test@localhost', GIT_COMMITTER_NAME: 'test', GIT_COMMITTER_EMAIL: 'test@localhost' }
export const git = (cwd: string, ...args: string[]) => execFileSync('git', args, { cwd, env: { ...process.env, ...GIT_ENV }, encoding: 'utf8' })

export interface Kept {
  repo: string
  home: string
  /** The child ids `dsh workspaces list` shows, in the order the children were started. */
  ids: string[]
}

/**
 * A repository with notes.txt of ten numbered lines, and a `dsh run` whose children each
 * replace one line in a worktree of their own and add a file, committing nothing; the
 * parent merges none, so every workspace is kept.
 */
export async function keptWorkspaces(lines: number[]): Promise<Kept> {
  const dir = tempDir()
  const repo = join(dir, 'repo')
  mkdirSync(repo)
  git(repo, 'init', '--quiet', '-b', 'main')
  writeFileSync(join(repo, 'notes.txt'), Array.from({ length: 10 }, (_, index) => `line ${index + 1}`).join('\n') + '\n')
  git(repo, 'add', '.')
  git(repo, 'commit', '--quiet', '-m', 'start')
  const home = join(dir, 'home')
  mkdirSync(home)
  const config = join(dir, 'dsh.yml')
  writeFileSync(config, ['- id: workspaces', '  name: "@dsh/workspaces"', '- id: tool-subagent-worktree', '  name: "@dsh/tool-subagent"', '  config: { provider: spawn, toolName: subagent_worktree, workspace: worktree }'].join('\n'))
  const script = join(dir, 'script.yml')
  writeFileSync(script, [
    ...lines.flatMap((n) => [`- when: { prompt: "edit line ${n}" }`, '  reply:', `    - call: { tool: bash, args: { command: "sed -i 's/^line ${n}$/line ${n}, by child ${n}/' notes.txt && echo new > new-${n}.txt" } }`, `    - text: "child ${n} done"`]),
    '- when: { depth: 0 }',
    '  reply:',
    ...lines.map((n) => `    - call: { tool: subagent_worktree, args: { description: "line ${n}", prompt: "edit line ${n}" } }`),
    '    - text: "left for a person"',
  ].join('\n'))
  const run = await runDsh(['run', '--config', config, '--permission', 'allow', '--model', `scripted:${script}`, '--session-dir', join(home, 'sessions'), 'go'], { cwd: repo, env: { DSH_HOME: home, ...GIT_ENV }, timeoutMs: 60_000 })
  expect(run.code, run.stderr).toBe(0)
  const listed = await runDsh(['workspaces', 'list'], { env: { DSH_HOME: home } })
  const entries = listed.stdout.trim().split('\n')
  expect(entries, `${listed.stdout}${listed.stderr}`).toHaveLength(lines.length)
  for (const entry of entries) expect(entry).toContain('kept (changes to merge or discard)')
  // Ordered by the line each child changed, as its branch is named by its label.
  const ids = lines.map((n) => entries.find((entry) => entry.includes(`dsh/line-${n}-`))!.split('  ')[0]!)
  return { repo, home, ids }
}
