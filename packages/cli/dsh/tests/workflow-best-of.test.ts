import { execFileSync } from 'node:child_process'
import { existsSync, mkdirSync, readdirSync, readFileSync, rmSync, symlinkSync, writeFileSync } from 'node:fs'
import { join } from 'node:path'
import { afterEach, beforeEach, describe, expect, it } from 'vitest'
import { repoRoot, runDsh, tempDir } from './cli.js'
import { processesMentioning } from './processes.js'

/**
 * bestOf through the built CLI: three spawn children on a scripted model each edit a
 * fixture git repository in a worktree of its own; a check command, a judge helper or both
 * pick the winner, which is merged, and the other worktrees and branches are gone.
 */
let repo: string
let home: string
let sessions: string
beforeEach(() => {
  repo = tempDir('dsh-bestof-repo-')
  home = tempDir('dsh-bestof-home-')
  sessions = tempDir('dsh-bestof-sessions-')
  git('init', '-q')
  git('config', 'user.email', 'test@example.com')
  git('config', 'user.name', 'test')
  write('answer.txt', '41\n')
})
afterEach(() => {
  for (const dir of [repo, home, sessions]) rmSync(dir, { recursive: true, force: true })
})

function git(...args: string[]): string {
  return execFileSync('git', args, { cwd: repo, encoding: 'utf8' })
}
function write(file: string, text: string): void {
  const path = join(repo, file)
  mkdirSync(join(path, '..'), { recursive: true })
  writeFileSync(path, text)
}

/** The attempts write 40, 42 and 43; the judge's rule comes first (its prompt quotes the task). */
function script(judgeReply: string): string {
  const attempt = (variant: string, value: string) => `- when: { prompt: "variant ${variant}" }\n  reply:\n    - call: { tool: write, args: { path: answer.txt, content: "${value}\\n" } }\n    - text: wrote ${value}\n`
  return `- when: { prompt: "attempts at one task" }\n  reply:\n    - ${judgeReply}\n${attempt('a', '40')}${attempt('b', '42')}${attempt('c', '43')}`
}

const ATTEMPTS = `[{ prompt: 'Fix it: variant a' }, { prompt: 'Fix it: variant b' }, { prompt: 'Fix it: variant c' }]`

async function runWorkflow(source: string, judgeReply = 'text: no verdict', extraArgs: string[] = [], model = script(judgeReply)): Promise<{ code: number | null; stderr: string; printed: Record<string, unknown> }> {
  write('model.yml', model)
  write('best.mjs', source)
  // A worktree starts from a commit: the fixture is committed whole.
  git('add', '-A')
  git('commit', '-qm', 'fixture')
  const result = await runDsh(['workflow', 'run', 'best.mjs', '--model', 'scripted:model.yml', '--session-dir', sessions, '--permission', 'allow', '--json', '--quiet', ...extraArgs], { cwd: repo, env: { DSH_HOME: home }, timeoutMs: 60_000 })
  return { code: result.code, stderr: result.stderr, printed: JSON.parse(result.stdout) as Record<string, unknown> }
}

/** Sessions the runs stored: the workflow's root alone when no attempt started. */
function readSessionsCount(): number {
  return readdirSync(sessions).filter((name) => name.endsWith('.jsonl')).length
}

/** Nothing of the attempts is left: no other worktree, no dsh/ branch, no workspace dsh knows of. */
async function expectNoWorkspaceLeft(): Promise<void> {
  expect(git('worktree', 'list').trim().split('\n')).toHaveLength(1)
  expect(git('branch', '--list', 'dsh/*').trim()).toBe('')
  const listed = await runDsh(['workspaces', 'list'], { cwd: repo, env: { DSH_HOME: home } })
  expect(listed.stdout).toMatch(/^no workspaces/)
}

describe('bestOf', () => {
  it('merges the one attempt whose check passes and discards the other two', async () => {
    const { code, printed } = await runWorkflow(`export default async ({ bestOf }) => bestOf(${ATTEMPTS}, { check: 'grep -qx 42 answer.txt' })\n`)
    expect(code).toBe(0)
    const value = printed.value as { winner: number; merged: boolean; why: string; attempts: Array<{ check: { passed: boolean } }> }
    expect(value.winner).toBe(2)
    expect(value.merged).toBe(true)
    expect(value.why).toContain('the only attempt whose check `grep -qx 42 answer.txt` passed')
    expect(value.attempts.map((attempt) => attempt.check.passed)).toEqual([false, true, false])
    expect(readFileSync(join(repo, 'answer.txt'), 'utf8')).toBe('42\n')
    await expectNoWorkspaceLeft()
    // The record in the root session says why.
    const root = readFileSync(join(sessions, `${printed.session as string}.jsonl`), 'utf8')
    expect(root).toContain('"name":"workflow.bestOf"')
    expect(root).toContain('won: the only attempt whose check')
  })

  it('lets a judge helper choose among the attempts by their diffs', async () => {
    const { code, printed } = await runWorkflow(`export default async ({ bestOf }) => bestOf(${ATTEMPTS}, { judge: 'spawn' })\n`, 'call: { tool: structured_output, args: { winner: 3, why: "three is the best" } }')
    expect(code).toBe(0)
    const value = printed.value as { winner: number; why: string; judge: { winner: number } }
    expect(value.winner).toBe(3)
    expect(value.judge.winner).toBe(3)
    expect(value.why).toContain('the judge "spawn" chose it: three is the best')
    expect(readFileSync(join(repo, 'answer.txt'), 'utf8')).toBe('43\n')
    await expectNoWorkspaceLeft()
  })

  it('says the judge failed, chooses nothing and leaves no workspace when there is no check to fall back on', async () => {
    const { code, printed, stderr } = await runWorkflow(`export default async ({ bestOf }) => bestOf(${ATTEMPTS}, { judge: 'spawn' })\n`, 'error: "the judge model fell over"')
    expect(code).toBe(1)
    expect((printed.stopped as { code: string }).code).toBe('NO_WINNER')
    expect(stderr).toContain('bestOf(): the judge "spawn" failed and there is no check to fall back on')
    // The attempts that finished are kept in the output and the record.
    expect((printed.finished as unknown[]).length).toBe(3)
    expect(readFileSync(join(repo, 'answer.txt'), 'utf8')).toBe('41\n')
    await expectNoWorkspaceLeft()
  })

  it('fails a check that hangs at its timeout, stops its processes, and declares no winner', async () => {
    // The workflow itself looks for the check's processes once bestOf has returned, while dsh still runs.
    const { code, printed } = await runWorkflow(`import { readdirSync, readFileSync } from 'node:fs'
const mentioning = (marker) => readdirSync('/proc').filter((pid) => /^\\d+$/.test(pid)).filter((pid) => { try { return readFileSync('/proc/' + pid + '/cmdline', 'utf8').includes(marker) } catch { return false } }).length
export default async ({ bestOf }) => {
  const result = await bestOf(${ATTEMPTS}, { check: 'sleep 617; true', checkTimeoutMs: 400 })
  return { ...result, checksLeft: mentioning('sleep 617') }
}
`)
    expect(code).toBe(0)
    const value = printed.value as { winner?: number; why: string; checksLeft: number }
    expect(value.checksLeft).toBe(0)
    expect(value.winner).toBeUndefined()
    expect(value.why).toContain('no attempt passed the check')
    expect(value.why).toContain('timed out after 400 ms')
    expect(processesMentioning('sleep 617')).toEqual([])
    expect(readFileSync(join(repo, 'answer.txt'), 'utf8')).toBe('41\n')
    await expectNoWorkspaceLeft()
  })
  it('runs the check sandboxed: a script the attempt wrote cannot write outside its worktree', async () => {
    const marker = join(home, 'PWN')
    const planted = `- when: { prompt: "Plant" }\n  reply:\n    - call: { tool: write, args: { path: test.sh, content: "touch ${marker} && exit 0\\n" } }\n    - text: planted\n`
    const { code, printed } = await runWorkflow(`export default async ({ bestOf }) => bestOf([{ prompt: 'Plant the test' }], { check: 'sh test.sh' })\n`, undefined, [], planted)
    expect(code).toBe(0)
    const value = printed.value as { attempts: Array<{ changed: boolean; check?: { passed: boolean } }> }
    expect(value.attempts[0]!.changed).toBe(true)
    expect(value.attempts[0]!.check).toBeDefined()
    // Whether the touch failed or landed in the sandbox's private /tmp, nothing reached the real one.
    expect(existsSync(marker)).toBe(false)
  })
  it('refuses a sandboxed check where bubblewrap is missing, before any attempt, saying how to run it unconfined; check: { command, sandbox: false } runs it', async () => {
    // A PATH with what the run needs but bwrap.
    const bin = join(home, 'bin')
    mkdirSync(bin)
    for (const program of ['git', 'bash', 'sh', 'grep']) symlinkSync(execFileSync('which', [program], { encoding: 'utf8' }).trim(), join(bin, program))
    write('model.yml', script('text: no verdict'))
    write('refused.mjs', `export default async ({ bestOf }) => bestOf(${ATTEMPTS}, { check: 'grep -qx 42 answer.txt' })\n`)
    write('unconfined.mjs', `export default async ({ bestOf }) => bestOf(${ATTEMPTS}, { check: { command: 'grep -qx 42 answer.txt', sandbox: false } })\n`)
    git('add', '-A')
    git('commit', '-qm', 'fixture')
    const run = (file: string) => runDsh(['workflow', 'run', file, '--model', 'scripted:model.yml', '--session-dir', sessions, '--permission', 'allow', '--json', '--quiet'], { cwd: repo, env: { DSH_HOME: home, PATH: bin }, timeoutMs: 60_000 })
    const refused = await run('refused.mjs')
    expect(refused.code).not.toBe(0)
    expect(refused.stderr).toContain('bestOf(): the check `grep -qx 42 answer.txt` runs over code a model wrote, so it runs sandboxed, and sandboxed commands need bubblewrap, which is not installed')
    expect(refused.stderr).toContain('check: { command, sandbox: false }')
    expect(readSessionsCount()).toBe(1)
    const unconfined = await run('unconfined.mjs')
    expect(unconfined.code).toBe(0)
    expect((JSON.parse(unconfined.stdout) as { value: { winner: number } }).value.winner).toBe(2)
    expect(readFileSync(join(repo, 'answer.txt'), 'utf8')).toBe('42\n')
  })

  it('judges attempts on three providers (spawn, fork and a dsh acp process) by the check and merges the one that passes', async () => {
    // The config lives outside the repository: a worktree holding an untrusted dsh.yml would be refused by the ACP child.
    const config = join(home, 'acp.yml')
    writeFileSync(config, `- id: subagent-acp\n  name: "@dsh/subagent-acp"\n  config:\n    providerName: acp\n    command: ${process.execPath}\n    args: [${join(repoRoot, 'packages/cli/dsh/dist/main.js')}, acp, --model, "scripted:model.yml", --permission, allow]\n`)
    const { code, printed } = await runWorkflow(
      `export default async ({ bestOf }) => bestOf([{ helper: 'spawn', prompt: 'Fix it: variant a' }, { helper: 'fork', prompt: 'Fix it: variant c' }, { helper: 'acp', prompt: 'Fix it: variant b' }], { check: 'grep -qx 42 answer.txt' })\n`,
      undefined,
      ['--config', config],
    )
    expect(code).toBe(0)
    const value = printed.value as { winner: number; merged: boolean; attempts: Array<{ helper: string; changed: boolean; check: { passed: boolean } }> }
    expect(value.attempts.map((attempt) => [attempt.helper, attempt.changed, attempt.check.passed])).toEqual([
      ['spawn', true, false],
      ['fork', true, false],
      ['acp', true, true],
    ])
    expect(value.winner).toBe(3)
    expect(value.merged).toBe(true)
    expect(readFileSync(join(repo, 'answer.txt'), 'utf8')).toBe('42\n')
    await expectNoWorkspaceLeft()
  })
})
