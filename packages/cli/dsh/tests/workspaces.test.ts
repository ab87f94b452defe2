/**
 * A workspace per child, through the CLI, keyless, on a real git repository the test
 * makes: children on worktrees of their own edit one file; the parent's tree is untouched
 * until its model merges; a conflict comes back listing the file; a provider that cannot
 * give a child a directory of its own is refused before anything starts; an interrupted run
 * leaves no worktree without a record.
 */
import { execFileSync, spawn } from 'node:child_process'
import { existsSync, mkdirSync, readFileSync, readdirSync, writeFileSync } from 'node:fs'
import { join } from 'node:path'
import { describe, expect, it } from 'vitest'
import { dshBin, runDsh, tempDir } from './cli.js'

const GIT_ENV = { GIT_AUTHOR_NAME: 'test', GIT_AUTHOR_EMAIL: 'test@localhost', GIT_COMMITTER_NAME: 'test', GIT_COMMITTER_EMAIL: 'test@localhost' }
const git = (cwd: string, ...args: string[]) => execFileSync('git', args, { cwd, env: { ...process.env, ...GIT_ENV }, encoding: 'utf8' })

/** A repository with notes.txt of ten numbered lines, committed; and the composition with workspaces. */
function project(): { repo: string; home: string; config: string } {
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
  writeFileSync(config, [
    '- id: workspaces',
    '  name: "@dsh/workspaces"',
    '- id: tool-workspace',
    '  name: "@dsh/tool-workspace"',
    '- id: tool-subagent-worktree',
    '  name: "@dsh/tool-subagent"',
    '  config: { provider: spawn, toolName: subagent_worktree, workspace: worktree }',
  ].join('\n'))
  return { repo, home, config }
}

/** A child that replaces line `n` of notes.txt and commits it. */
const edit = (label: string, n: number) => [
  `- when: { prompt: "edit as ${label}" }`,
  '  reply:',
  `    - call: { tool: bash, args: { command: "sed -i 's/^line ${n}$/line ${n}, by the ${label} child/' notes.txt && git -c user.name=child -c user.email=child@localhost commit -qam '${label} edit' && git log --format=%s -1" } }`,
  `    - text: "${label} done: {{last_tool_result}}"`,
]

describe('a workspace per child, through dsh run', () => {
  it('three children edit one file on worktrees of their own; the parent is untouched until it merges; two merge, the third reports its conflict naming the file', async () => {
    const { repo, home, config } = project()
    const script = join(home, 'script.yml')
    writeFileSync(script, [
      ...edit('first', 2),
      ...edit('second', 9),
      ...edit('third', 2),
      '- when: { depth: 0 }',
      '  reply:',
      '    - calls:',
      '        - { tool: subagent_worktree, args: { description: first, prompt: "edit as first" } }',
      '        - { tool: subagent_worktree, args: { description: second, prompt: "edit as second" } }',
      '        - { tool: subagent_worktree, args: { description: third, prompt: "edit as third" } }',
      '    - call: { tool: bash, args: { command: "cat notes.txt" } }',
      '    - call: { tool: workspace, args: { action: merge, subagent_id: first } }',
      '    - call: { tool: workspace, args: { action: merge, subagent_id: second } }',
      '    - call: { tool: workspace, args: { action: merge, subagent_id: third } }',
      '    - text: "merged: {{last_tool_result}}"',
    ].join('\n'))
    const result = await runDsh(['run', '--config', config, '--permission', 'allow', '--model', `scripted:${script}`, '--session-dir', join(home, 'sessions'), 'fix the notes'], { cwd: repo, env: { DSH_HOME: home, ...GIT_ENV }, timeoutMs: 60_000 })
    expect(result.code, result.stderr).toBe(0)
    const root = readdirSync(join(home, 'sessions')).map((name) => readFileSync(join(home, 'sessions', name), 'utf8')).find((text) => text.includes('"origin":"cli"'))!
    const results = root.trim().split('\n').map((line) => JSON.parse(line) as { type?: string; result?: { name: string; content: Array<{ text: string }> } }).filter((line) => line.type === 'tool/result').map((line) => ({ name: line.result!.name, text: line.result!.content.map((block) => block.text).join('') }))
    // Each child's result says what it changed on its branch, and how to bring it back.
    const children = results.filter((entry) => entry.name === 'subagent_worktree')
    expect(children).toHaveLength(3)
    for (const child of children) expect(child.text).toMatch(/workspace: its worktree on branch dsh\/\S+: 1 file changed, 1 insertion\(\+\), 1 deletion\(-\) \(committed\)\n {2}modified notes\.txt \(\+1 -1\)\nYour directory is unchanged until you bring this back/)
    // The parent's tree was untouched while they worked.
    expect(results.find((entry) => entry.name === 'bash')!.text).not.toContain('child')
    const merges = results.filter((entry) => entry.name === 'workspace').map((entry) => entry.text)
    expect(merges[0]).toMatch(/^merged dsh\/first-\S+: 1 file changed/)
    expect(merges[1]).toMatch(/^merged dsh\/second-\S+: 1 file changed/)
    expect(merges[2]).toMatch(/conflicts in notes\.txt; nothing was changed[\s\S]*conflicting files:\n {2}notes\.txt/)
    const notes = readFileSync(join(repo, 'notes.txt'), 'utf8')
    expect(notes).toContain('line 2, by the first child')
    expect(notes).toContain('line 9, by the second child')
    expect(notes).not.toContain('third')
    expect(git(repo, 'status', '--porcelain')).toBe('')
    // The third is kept for its parent (or a person) to resolve: listed, on its branch.
    const listed = await runDsh(['workspaces', 'list'], { env: { DSH_HOME: home } })
    expect(listed.stdout).toMatch(/worktree dsh\/third-\S+ of .*kept \(changes to merge or discard\)/)
    expect(listed.stdout.trim().split('\n')).toHaveLength(1)
  })

  it('a child that changed nothing leaves no workspace behind, and its result says so', async () => {
    const { repo, home, config } = project()
    const script = join(home, 'script.yml')
    writeFileSync(script, [
      '- when: { prompt: "look only" }',
      '  reply: [{ text: "nothing to change" }]',
      '- when: { depth: 0 }',
      '  reply:',
      '    - call: { tool: subagent_worktree, args: { description: looker, prompt: "look only" } }',
      '    - text: "{{last_tool_result}}"',
    ].join('\n'))
    const result = await runDsh(['run', '--config', config, '--model', `scripted:${script}`, '--session-dir', join(home, 'sessions'), 'look'], { cwd: repo, env: { DSH_HOME: home, ...GIT_ENV } })
    expect(result.code, result.stderr).toBe(0)
    expect(result.stdout).toContain('workspace: the child changed nothing in its worktree on branch dsh/looker-')
    expect(git(repo, 'worktree', 'list').trim().split('\n')).toHaveLength(1)
    expect(git(repo, 'branch', '--list', 'dsh/*')).toBe('')
  })

  it('a worktree asked of a provider that cannot honour it (a2a) is refused before anything starts, in one line', async () => {
    const { repo, home } = project()
    const config = join(home, 'a2a.yml')
    writeFileSync(config, [
      '- id: workspaces',
      '  name: "@dsh/workspaces"',
      '- id: subagent-a2a',
      '  name: "@dsh/subagent-a2a"',
      '  config: { urls: ["http://127.0.0.1:9"] }',
      '- id: tool-subagent-a2a',
      '  name: "@dsh/tool-subagent"',
      '  config: { provider: a2a, toolName: subagent_a2a, workspace: worktree }',
    ].join('\n'))
    const result = await runDsh(['run', '--config', config, '--model', 'scripted:examples/hello.yml', '--session-dir', join(home, 'sessions'), 'hello'], { env: { DSH_HOME: home } })
    expect(result.code).toBe(2)
    expect(result.stderr.trim().split('\n')).toHaveLength(1)
    expect(result.stderr).toContain('sets workspace worktree, but subagent provider "a2a" cannot give its child a directory of its own')
    expect(existsSync(join(home, 'sessions')) ? readdirSync(join(home, 'sessions')) : []).toEqual([])
    expect(git(repo, 'worktree', 'list').trim().split('\n')).toHaveLength(1)
  })

  it('a dirty tree is refused for a worktree with a clear error to the parent\'s model, and nothing is touched', async () => {
    const { repo, home, config } = project()
    writeFileSync(join(repo, 'notes.txt'), 'changed by hand\n')
    const script = join(home, 'script.yml')
    writeFileSync(script, ['- when: { depth: 0 }', '  reply:', '    - call: { tool: subagent_worktree, args: { description: x, prompt: "anything" } }', '    - text: "{{last_tool_result}}"'].join('\n'))
    const result = await runDsh(['run', '--config', config, '--model', `scripted:${script}`, '--session-dir', join(home, 'sessions'), 'go'], { cwd: repo, env: { DSH_HOME: home } })
    expect(result.code, result.stderr).toBe(0)
    expect(result.stdout).toContain("the child's worktree workspace could not be made: the parent's tree has uncommitted changes (1 file: notes.txt)")
    expect(readFileSync(join(repo, 'notes.txt'), 'utf8')).toBe('changed by hand\n')
    expect(git(repo, 'worktree', 'list').trim().split('\n')).toHaveLength(1)
  })

  it('an interrupted run leaves no worktree without a record: a child with changes is kept and listed, nothing is orphaned', async () => {
    const { repo, home, config } = project()
    const script = join(home, 'script.yml')
    writeFileSync(script, [
      '- when: { prompt: "slow edit" }',
      '  reply:',
      '    - call: { tool: bash, args: { command: "echo more >> notes.txt" } }',
      '    - { text: "still going", delay_ms: 60000 }',
      '- when: { depth: 0 }',
      '  reply:',
      '    - call: { tool: subagent_worktree, args: { description: slow, prompt: "slow edit" } }',
      '    - text: "unreachable"',
    ].join('\n'))
    const child = spawn(process.execPath, [dshBin, 'run', '--config', config, '--permission', 'allow', '--model', `scripted:${script}`, '--session-dir', join(home, 'sessions'), 'go'], { cwd: repo, env: { ...process.env, DSH_HOME: home, ...GIT_ENV }, stdio: ['ignore', 'pipe', 'pipe'] })
    let err = ''
    child.stderr.on('data', (chunk) => (err += chunk))
    // Wait until the child has written in its worktree, then interrupt the run.
    const trees = join(home, 'workspaces', 'trees')
    const written = () => existsSync(trees) && readdirSync(trees).some((name) => existsSync(join(trees, name, 'notes.txt')) && readFileSync(join(trees, name, 'notes.txt'), 'utf8').includes('more'))
    const deadline = Date.now() + 20_000
    while (Date.now() < deadline && !written()) await new Promise((resolve) => setTimeout(resolve, 100))
    expect(written()).toBe(true)
    child.kill('SIGINT')
    const code = await new Promise<number | null>((resolve) => child.on('exit', resolve))
    expect(code, err).toBe(130)
    const worktrees = git(repo, 'worktree', 'list', '--porcelain').split('\n').filter((line) => line.startsWith('worktree ')).map((line) => line.slice('worktree '.length))
    expect(worktrees).toHaveLength(2)
    const listed = await runDsh(['workspaces', 'list'], { env: { DSH_HOME: home } })
    expect(listed.stdout).toContain(worktrees[1]!)
    expect(listed.stdout).toContain('kept (changes to merge or discard)')
    expect(listed.stdout).not.toContain('orphaned')
  })
})

describe('who may act on a workspace, through dsh run', () => {
  it("a sibling cannot merge a child's kept workspace by its label (to it there is none); the agent that started the child merges it", async () => {
    const { repo, home, config } = project()
    const script = join(home, 'script.yml')
    writeFileSync(script, [
      ...edit('first', 2),
      '- when: { prompt: "meddle" }',
      '  reply:',
      '    - call: { tool: workspace, args: { action: merge, subagent_id: first } }',
      '    - text: "meddler: {{last_tool_result}}"',
      '- when: { depth: 0 }',
      '  reply:',
      '    - call: { tool: subagent_worktree, args: { description: first, prompt: "edit as first" } }',
      '    - call: { tool: subagent, args: { description: meddler, prompt: "meddle" } }',
      '    - call: { tool: workspace, args: { action: merge, subagent_id: first } }',
      '    - text: "merged: {{last_tool_result}}"',
    ].join('\n'))
    const result = await runDsh(['run', '--config', config, '--permission', 'allow', '--model', `scripted:${script}`, '--session-dir', join(home, 'sessions'), 'go'], { cwd: repo, env: { DSH_HOME: home, ...GIT_ENV }, timeoutMs: 60_000 })
    expect(result.code, result.stderr).toBe(0)
    const root = readdirSync(join(home, 'sessions')).map((name) => readFileSync(join(home, 'sessions', name), 'utf8')).find((text) => text.includes('"origin":"cli"'))!
    const results = root.trim().split('\n').map((line) => JSON.parse(line) as { type?: string; result?: { name: string; content: Array<{ text: string }> } }).filter((line) => line.type === 'tool/result').map((line) => ({ name: line.result!.name, text: line.result!.content.map((block) => block.text).join('') }))
    expect(results.find((entry) => entry.name === 'subagent')!.text).toContain('meddler: subagent first has no workspace')
    expect(results.find((entry) => entry.name === 'workspace')!.text).toMatch(/^merged dsh\/first-\S+: 1 file changed/)
    expect(readFileSync(join(repo, 'notes.txt'), 'utf8')).toContain('line 2, by the first child')
    expect(git(repo, 'branch', '--list', 'dsh/*')).toBe('')
  })
})

describe('dsh workspaces list and clean', () => {
  it('a record dsh would never have written is listed as an orphan with its reason, and clean removes the record alone', async () => {
    const { repo, home } = project()
    const records = join(home, 'workspaces', 'records')
    mkdirSync(records, { recursive: true })
    const root = join(home, 'workspaces', 'trees', 'forged-1')
    writeFileSync(join(records, 'forged-1.json'), JSON.stringify({ id: 'forged-1', childId: 'forged', tree: 'root', mode: 'worktree', root, path: root, source: repo, repository: repo, branch: 'dsh/forged-1', base: '--output=/tmp/owned', createdAt: new Date().toISOString(), pid: 1, state: 'kept' }))
    const listed = await runDsh(['workspaces', 'list'], { env: { DSH_HOME: home } })
    expect(listed.code, listed.stderr).toBe(0)
    expect(listed.stdout.trim()).toBe(`forged-1  invalid record ${join(records, 'forged-1.json')}: its base "--output=/tmp/owned" is not a commit id  orphaned (clean removes the record alone)`)
    const cleaned = await runDsh(['workspaces', 'clean'], { env: { DSH_HOME: home } })
    expect(cleaned.code, cleaned.stderr).toBe(0)
    expect(cleaned.stdout).toContain(`removed the invalid record ${join(records, 'forged-1.json')} (its base "--output=/tmp/owned" is not a commit id); nothing it names was touched`)
    expect(readdirSync(records)).toEqual([])
    expect(existsSync('/tmp/owned')).toBe(false)
  })
})

describe('a confined helper, through dsh run', () => {
  it("a helper with sandbox: true writes inside its directory and cannot write outside it or read dsh's environment; its own children are confined too", async () => {
    const dir = tempDir()
    const work = join(dir, 'work')
    const outside = join(dir, 'outside')
    mkdirSync(join(work, '.dsh', 'agents'), { recursive: true })
    mkdirSync(outside)
    writeFileSync(join(work, '.dsh', 'agents', 'boxed.md'), ['---', 'name: boxed', 'description: Works confined.', 'sandbox: no-network', '---', 'You work confined.', ''].join('\n'))
    const script = join(dir, 'script.yml')
    writeFileSync(script, [
      '- when: { prompt: "inner work" }',
      '  reply:',
      `    - call: { tool: bash, args: { command: "touch ${join(outside, 'grand-escaped')} 2>&1; echo grand-exit=$?" } }`,
      '    - text: "grandchild: {{last_tool_result}}"',
      '- when: { prompt: "boxed work" }',
      '  reply:',
      `    - call: { tool: bash, args: { command: "touch inside.txt && echo inside-ok; touch ${join(outside, 'escaped')} 2>&1; echo outside-exit=$?; cat /proc/$PPID/environ 2>&1 | tr '\\\\0' '\\\\n' | grep -c DSH_TEST_SECRET || true" } }`,
      '    - call: { tool: subagent, args: { agent: boxed, description: inner, prompt: "inner work" } }',
      '    - text: "boxed: {{tool_results}}"',
      '- when: { depth: 0 }',
      '  reply:',
      '    - call: { tool: subagent, args: { agent: boxed, description: boxed, prompt: "boxed work" } }',
      '    - text: "{{last_tool_result}}"',
    ].join('\n'))
    const result = await runDsh(['run', '--permission', 'allow', '--model', `scripted:${script}`, '--session-dir', join(dir, 'sessions'), 'go'], { cwd: work, env: { DSH_HOME: dir, DSH_TEST_SECRET: 'sk-not-for-children' }, timeoutMs: 60_000 })
    expect(result.code, result.stderr).toBe(0)
    expect(existsSync(join(work, 'inside.txt'))).toBe(true)
    expect(existsSync(join(outside, 'escaped'))).toBe(false)
    expect(existsSync(join(outside, 'grand-escaped'))).toBe(false)
    // What the confined commands printed, in the children's own sessions.
    const logs = readdirSync(join(dir, 'sessions')).map((name) => readFileSync(join(dir, 'sessions', name), 'utf8')).join('\n')
    expect(logs).toContain('inside-ok')
    expect(logs).toMatch(/outside-exit=[1-9]/)
    expect(logs).toMatch(/grand-exit=[1-9]/)
    expect(logs).not.toContain('sk-not-for-children')
    expect(result.stdout).not.toContain('sk-not-for-children')
    const headers = readdirSync(join(dir, 'sessions')).map((name) => JSON.parse(readFileSync(join(dir, 'sessions', name), 'utf8').split('\n')[0]!).header as { delegationDepth?: number; sandbox?: { network: boolean } })
    expect(headers.filter((header) => (header.delegationDepth ?? 0) > 0).map((header) => header.sandbox)).toEqual([{ network: false }, { network: false }])
  })
})
