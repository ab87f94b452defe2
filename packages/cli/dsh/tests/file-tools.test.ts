/**
 * The file tools through the built CLI, on real repositories: a read-only reviewer child
 * (its tools read, grep and glob) finds a string and quotes its file and line; a writer
 * child in a worktree edits a file that the main tree sees only once the worktree is
 * merged; and under --permission reject an edit anywhere in the tree is refused, the file
 * unchanged, unless a rule of the root's config allows its path.
 */
import { execFileSync } from 'node:child_process'
import { mkdirSync, readdirSync, readFileSync, writeFileSync } from 'node:fs'
import { join } from 'node:path'
import { describe, expect, it } from 'vitest'
import { runDsh, tempDir } from './cli.js'

const GIT_ENV = { GIT_AUTHOR_NAME: 'test', GIT_AUTHOR_EMAIL: 'test@localhost', GIT_COMMITTER_NAME: 'test', GIT_COMMITTER_EMAIL: 'test@localhost' }
const git = (cwd: string, ...args: string[]) => execFileSync('git', ['-c', 'core.hooksPath=/dev/null', ...args], { cwd, env: { ...process.env, ...GIT_ENV }, encoding: 'utf8' })

/** A repository with a few files committed, a config and a home of its own. */
function fixture(config: string[], script: string[]): { dir: string; repo: string; home: string; args: string[] } {
  const dir = tempDir()
  const repo = join(dir, 'repo')
  mkdirSync(join(repo, 'src', 'deep'), { recursive: true })
  writeFileSync(join(repo, 'README.md'), '# fixture\n')
  writeFileSync(join(repo, 'src', 'deep', 'code.ts'), 'export const a = 1\n// the reviewer looks for this:\nconst marker = "needle-in-the-haystack"\n')
  writeFileSync(join(repo, 'notes.txt'), 'one\n')
  git(repo, 'init', '--quiet', '-b', 'main')
  git(repo, 'add', '.')
  git(repo, 'commit', '--quiet', '-m', 'start')
  const home = join(dir, 'home')
  mkdirSync(home)
  writeFileSync(join(dir, 'dsh.yml'), `${config.join('\n')}\n`)
  writeFileSync(join(dir, 'script.yml'), `${script.join('\n')}\n`)
  return { dir, repo, home, args: ['run', '--config', join(dir, 'dsh.yml'), '--model', `scripted:${join(dir, 'script.yml')}`, '--session-dir', join(home, 'sessions')] }
}

/** Every tool result of every session of the run, as `name: text`. */
function toolResults(home: string): string[] {
  const dir = join(home, 'sessions')
  return readdirSync(dir)
    .filter((name) => name.endsWith('.jsonl'))
    .flatMap((name) => readFileSync(join(dir, name), 'utf8').split('\n').filter(Boolean).map((line) => JSON.parse(line) as { type?: string; result?: { name: string; content: { text: string }[] } }))
    .flatMap((event) => (event.type === 'tool/result' && event.result ? [`${event.result.name}: ${event.result.content.map((part) => part.text).join('')}`] : []))
}

describe('the file tools through dsh run', () => {
  it('a reviewer child whose tools are read, grep and glob finds a string and quotes its file and line, and cannot edit', async () => {
    const { repo, home, args } = fixture(
      ['- id: tool-subagent-reviewer', '  name: "@dsh/tool-subagent"', '  config: { provider: spawn, toolName: subagent_reviewer, toolFilter: { allow: [read, grep, glob] } }'],
      [
        '- when: { prompt: "review" }',
        '  reply:',
        '    - call: { tool: glob, args: { pattern: "**/*.ts" } }',
        '    - call: { tool: grep, args: { pattern: "needle-in-the", output_mode: content } }',
        '    - call: { tool: edit, args: { path: notes.txt, old_string: one, new_string: changed } }',
        '    - call: { tool: read, args: { path: src/deep/code.ts, offset: 3, limit: 1 } }',
        '    - text: "found it: {{last_tool_result}}"',
        '- when: { depth: 0 }',
        '  reply:',
        '    - call: { tool: subagent_reviewer, args: { description: reviewer, prompt: "review" } }',
        '    - text: "the reviewer said: {{last_tool_result}}"',
      ],
    )
    const result = await runDsh([...args, '--quiet', 'go'], { cwd: repo, env: { DSH_HOME: home }, timeoutMs: 60_000 })
    expect(result.code, result.stderr).toBe(0)
    expect(result.stdout).toContain('the reviewer said: found it:      3\tconst marker = "needle-in-the-haystack"')
    const results = toolResults(home)
    expect(results).toContain('glob: src/deep/code.ts')
    expect(results).toContain('grep: src/deep/code.ts:3:const marker = "needle-in-the-haystack"')
    // The reviewer's edit never ran: the tool is not among its tools.
    expect(results).toContain('edit: unknown tool "edit" (available: read, glob, grep)')
    expect(readFileSync(join(repo, 'notes.txt'), 'utf8')).toBe('one\n')
  })

  it("a writer child in a worktree edits its worktree's file; the main tree has the change only once the worktree is merged", async () => {
    const { repo, home, args } = fixture(
      [
        '- id: workspaces',
        '  name: "@dsh/workspaces"',
        '- id: tool-workspace',
        '  name: "@dsh/tool-workspace"',
        '- id: tool-subagent-worktree',
        '  name: "@dsh/tool-subagent"',
        '  config: { provider: spawn, toolName: subagent_worktree, workspace: worktree }',
      ],
      [
        '- when: { prompt: "write" }',
        '  reply:',
        '    - call: { tool: edit, args: { path: notes.txt, old_string: "one", new_string: "written by the child" } }',
        '    - call: { tool: bash, args: { command: "pwd && cat notes.txt" } }',
        '    - text: "wrote: {{last_tool_result}}"',
        '- when: { depth: 0 }',
        '  reply:',
        '    - call: { tool: subagent_worktree, args: { description: writer, prompt: "write" } }',
        '    - call: { tool: read, args: { path: notes.txt } }',
        '    - call: { tool: workspace, args: { action: merge, subagent_id: writer } }',
        '    - call: { tool: read, args: { path: notes.txt } }',
        '    - text: "after the merge: {{last_tool_result}}"',
      ],
    )
    const result = await runDsh([...args, '--permission', 'allow', '--quiet', 'go'], { cwd: repo, env: { DSH_HOME: home, ...GIT_ENV }, timeoutMs: 90_000 })
    expect(result.code, result.stderr).toBe(0)
    const results = toolResults(home)
    expect(results).toContain('edit: edited notes.txt: line 1')
    const childBash = results.find((line) => line.startsWith('bash: exit code 0'))!
    // The child worked in a worktree of its own, not in the repository it came from.
    expect(childBash).not.toContain(`${repo}\n`)
    expect(childBash).toContain('written by the child')
    const reads = results.filter((line) => line.startsWith('read: '))
    expect(reads).toEqual(['read:      1\tone', 'read:      1\twritten by the child'])
    expect(result.stdout).toContain('after the merge:      1\twritten by the child')
    expect(readFileSync(join(repo, 'notes.txt'), 'utf8')).toBe('written by the child\n')
  })

  it('under --permission reject an edit by the root or a child is refused and the file unchanged; a rule edit(src/**) in the config lets edits under src/ through', async () => {
    const script = [
      '- when: { prompt: "edit" }',
      '  reply:',
      '    - call: { tool: edit, args: { path: notes.txt, old_string: one, new_string: child } }',
      '    - call: { tool: edit, args: { path: src/deep/code.ts, old_string: "export const a = 1", new_string: "export const a = 2" } }',
      '    - text: "child done"',
      '- when: { depth: 0 }',
      '  reply:',
      '    - call: { tool: write, args: { path: notes.txt, content: root } }',
      '    - call: { tool: subagent, args: { description: editor, prompt: "edit" } }',
      '    - text: "root done"',
    ]
    const rejected = fixture(['[]'], script)
    const first = await runDsh([...rejected.args, '--permission', 'reject', '--quiet', 'go'], { cwd: rejected.repo, env: { DSH_HOME: rejected.home }, timeoutMs: 60_000 })
    expect(first.code, first.stderr).toBe(0)
    const refusals = toolResults(rejected.home).filter((line) => /^(edit|write): /.test(line))
    expect(refusals).toHaveLength(3)
    for (const line of refusals) expect(line).toMatch(/^(edit|write): (edit|write) was not run: permission denied by dsh run --permission reject/)
    expect(readFileSync(join(rejected.repo, 'notes.txt'), 'utf8')).toBe('one\n')
    expect(readFileSync(join(rejected.repo, 'src/deep/code.ts'), 'utf8')).toContain('export const a = 1')

    const ruled = fixture(['- id: approvals', '  name: "@dsh/approvals"', '  config: { allow: ["edit(src/**)"] }'], script)
    const second = await runDsh([...ruled.args, '--permission', 'reject', '--quiet', 'go'], { cwd: ruled.repo, env: { DSH_HOME: ruled.home }, timeoutMs: 60_000 })
    expect(second.code, second.stderr).toBe(0)
    const outcomes = toolResults(ruled.home).filter((line) => /^(edit|write): /.test(line))
    expect(outcomes).toContain('edit: edited src/deep/code.ts: line 1')
    expect(outcomes.filter((line) => line.includes('permission denied'))).toHaveLength(2)
    expect(readFileSync(join(ruled.repo, 'src/deep/code.ts'), 'utf8')).toContain('export const a = 2')
    expect(readFileSync(join(ruled.repo, 'notes.txt'), 'utf8')).toBe('one\n')
  })
})
