/**
 * A shared workspace over ACP (`sharedWorkspace: true`): the provider is its agent's file
 * system and terminal, in the agent's working directory. A third-party agent (the fixture,
 * on the official SDK) reads and edits a file of the parent's tree through `fs/*`, the
 * write asked about at the parent's broker naming the child; writes outside the directory
 * (a relative path, `..`, an absolute path elsewhere, symlinks pointing out) are refused
 * before anyone is asked, and nothing is written; its commands run through the parent's
 * `ctx.bash` in that directory, each asked first; cancelling the run kills its terminals.
 * `dsh acp` as the child runs its bash tool's commands through the parent's terminal,
 * asked about once.
 */
import { existsSync, mkdirSync, mkdtempSync, readdirSync, readFileSync, realpathSync, renameSync, symlinkSync, writeFileSync } from 'node:fs'
import { tmpdir } from 'node:os'
import { join } from 'node:path'
import { afterEach, beforeAll, describe, expect, it } from 'vitest'
import { ApprovalService, type ApprovalRequestInfo } from '@dsh/approvals'
import type { PermissionDecision } from '@dsh/base'
import { BashService } from '@dsh/bash'
import { textOf } from '@dsh/llm'
import type { AcpProviderConfig } from '@dsh/subagent-acp'
import { dshMain, fixture, isAlive, liveChildren, setup, waitFor, type Setup } from './helpers.js'

let current: Setup | undefined
afterEach(async () => {
  await current?.harness.dispose()
  current = undefined
})

function tempDir(prefix: string): string {
  return realpathSync(mkdtempSync(join(tmpdir(), prefix)))
}

interface Shared extends Setup {
  dir: string
  asked: ApprovalRequestInfo[]
  answer: { next: (request: ApprovalRequestInfo) => PermissionDecision | Promise<PermissionDecision> }
}

/** A parent working in a fresh directory, with a broker whose front-end the test answers, ctx.bash, and the provider in shared mode. */
async function shared(config: Partial<AcpProviderConfig> & { command: string }, dir = tempDir('acp-shared-')): Promise<Shared> {
  current = await setup({ sharedWorkspace: true, ...config }, dir)
  await current.harness.plugin(BashService)
  await current.harness.plugin(ApprovalService)
  const asked: ApprovalRequestInfo[] = []
  const answer: Shared['answer'] = { next: () => ({ decision: 'allow-once', by: 'the test user' }) }
  current.harness.ctx.approvals.addFrontEnd({
    name: 'the test user',
    ask: async (request) => {
      asked.push(request)
      return answer.next(request)
    },
  })
  return { ...current, dir, asked, answer }
}

/** The fixture agent in `shared` mode: its prompt is the list of steps it takes through its client. */
function fixtureAgent(): Partial<AcpProviderConfig> & { command: string } {
  return { command: process.execPath, args: [fixture('agent.mjs'), 'shared'] }
}

async function runSteps(setupDone: Shared, steps: unknown[], label = 'editor'): Promise<{ lines: string[]; id: string }> {
  const run = await setupDone.harness.ctx.subagents.start('acp', setupDone.request(JSON.stringify(steps), { label }))
  const result = await run.result
  await run.dispose()
  expect(result.stopReason).toBe('completed')
  return { lines: textOf(result.output).split('\n'), id: run.id }
}

describe('acp shared workspace: a third-party agent uses the parent\'s fs and terminal', () => {
  it('is offered fs and terminal, reads a file of the parent\'s tree unasked, and edits it after the parent\'s broker asked about the write, naming the child', async () => {
    const setupDone = await shared(fixtureAgent())
    const { dir, asked, parent } = setupDone
    mkdirSync(join(dir, 'src'))
    writeFileSync(join(dir, 'src', 'app.txt'), 'one\ntwo\nthree\n')
    const { lines, id } = await runSteps(setupDone, [
      { op: 'capabilities' },
      { op: 'read', path: join(dir, 'src', 'app.txt') },
      { op: 'read', path: join(dir, 'src', 'app.txt'), line: 2, limit: 1 },
      { op: 'write', path: join(dir, 'src', 'app.txt'), content: 'one\nTWO\nthree\n' },
      { op: 'write', path: join(dir, 'src', 'new', 'made.txt'), content: 'made\n' },
    ])
    expect(lines).toEqual([
      'capabilities: {"fs":{"readTextFile":true,"writeTextFile":true},"terminal":true}',
      'read: "one\\ntwo\\nthree\\n"',
      'read: "two"',
      `wrote ${join(dir, 'src', 'app.txt')}`,
      `wrote ${join(dir, 'src', 'new', 'made.txt')}`,
    ])
    expect(readFileSync(join(dir, 'src', 'app.txt'), 'utf8')).toBe('one\nTWO\nthree\n')
    expect(readFileSync(join(dir, 'src', 'new', 'made.txt'), 'utf8')).toBe('made\n')
    // Reads are not side effects; each write was put to the front-end as the child's, as
    // the write tool asks: by the file's one name in the directory, so write(src/**) rules match.
    expect(asked.map((request) => ({ tool: request.tool, subject: request.subject, kind: request.kind, child: request.child, who: request.path.at(-1) }))).toEqual([
      { tool: 'write', subject: 'src/app.txt', kind: 'edit', child: id, who: 'acp "editor"' },
      { tool: 'write', subject: 'src/new/made.txt', kind: 'edit', child: id, who: 'acp "editor"' },
    ])
    // The agent keeps no session of ours: its decisions are recorded in the parent's.
    const recorded = parent.session.events().filter((event) => event.type === 'approval')
    expect(recorded).toHaveLength(2)
    expect(recorded[0]).toMatchObject({ request: { tool: 'write', subject: 'src/app.txt', child: id }, permission: { decision: 'allow-once', by: 'the test user', source: 'user' } })
  })

  it('a write the broker refuses is not made, and the agent reads why', async () => {
    const setupDone = await shared(fixtureAgent())
    const { dir, answer } = setupDone
    writeFileSync(join(dir, 'keep.txt'), 'original\n')
    answer.next = () => ({ decision: 'reject', by: 'the test user', reason: 'not that file' })
    const { lines } = await runSteps(setupDone, [{ op: 'write', path: join(dir, 'keep.txt'), content: 'changed\n' }])
    expect(lines).toEqual(['write refused: -32003 write keep.txt was refused: permission denied by the test user: not that file'])
    expect(readFileSync(join(dir, 'keep.txt'), 'utf8')).toBe('original\n')
  })

  it('refuses writes and reads outside its directory (a relative path, .., an absolute path elsewhere, symlinks pointing out), a write onto a directory or into .git, as the file tools refuse them, before anyone is asked, and writes nothing', async () => {
    const outside = tempDir('acp-shared-outside-')
    const root = tempDir('acp-shared-parent-')
    const dir = join(root, 'tree')
    mkdirSync(dir)
    writeFileSync(join(outside, 'secret.txt'), 'secret\n')
    symlinkSync(outside, join(dir, 'link-dir'))
    symlinkSync(join(outside, 'secret.txt'), join(dir, 'link-file'))
    symlinkSync(join(outside, 'missing.txt'), join(dir, 'dangling'))
    mkdirSync(join(dir, '.git'))
    const setupDone = await shared(fixtureAgent(), dir)
    const { asked } = setupDone
    const { lines } = await runSteps(setupDone, [
      { op: 'write', path: '../x', content: 'x' },
      { op: 'write', path: join(dir, '..', 'x'), content: 'x' },
      { op: 'write', path: join(outside, 'x'), content: 'x' },
      { op: 'write', path: join(dir, 'link-dir', 'x'), content: 'x' },
      { op: 'write', path: join(dir, 'link-file'), content: 'x' },
      { op: 'write', path: join(dir, 'dangling'), content: 'x' },
      { op: 'read', path: join(dir, 'link-file') },
      { op: 'read', path: join(dir, '..', 'tree', 'link-dir', 'secret.txt') },
      { op: 'write', path: dir, content: 'x' },
      { op: 'write', path: join(dir, '.git', 'hooks', 'pre-commit'), content: 'x' },
    ])
    expect(lines).toHaveLength(10)
    for (const line of lines) expect(line).toMatch(/^(write|read) refused: -32602 /)
    expect(lines[0]).toContain('is not absolute')
    expect(lines[1]).toContain(`${join(root, 'x')} is outside the working directory ${dir}; an ACP agent reaches only its working directory through its client`)
    expect(lines[3]).toContain(`(through a symbolic link, to ${join(outside, 'x')})`)
    expect(lines[5]).toContain('is a symbolic link to a file that does not exist')
    expect(lines[8]).toContain(`${dir} is a directory`)
    expect(lines[9]).toContain('is inside a .git directory')
    expect(existsSync(join(dir, '.git', 'hooks'))).toBe(false)
    expect(existsSync(join(root, 'x'))).toBe(false)
    expect(existsSync(join(outside, 'x'))).toBe(false)
    expect(existsSync(join(outside, 'missing.txt'))).toBe(false)
    expect(readFileSync(join(outside, 'secret.txt'), 'utf8')).toBe('secret\n')
    expect(asked).toEqual([])
  })

  it('runs a command through the parent\'s ctx.bash in its directory after the broker asked, refuses a cwd outside, and a refused command does not run', async () => {
    const setupDone = await shared(fixtureAgent())
    const { dir, asked, answer } = setupDone
    answer.next = (request) => (request.subject.includes('refused-ran') ? { decision: 'reject', by: 'the test user', reason: 'no' } : { decision: 'allow-once', by: 'the test user' })
    const { lines } = await runSteps(setupDone, [
      { op: 'run', command: 'bash', args: ['-c', 'echo "ppid=$PPID cwd=$(pwd)"'] },
      { op: 'run', command: 'printf', args: ['%s|', 'a b', "it's"] },
      { op: 'run', command: 'bash', args: ['-c', 'touch refused-ran'] },
      { op: 'run', command: 'bash', args: ['-c', 'pwd'], cwd: tmpdir() },
      { op: 'run', command: 'bash', args: ['-c', 'echo $GREETING'], env: [{ name: 'GREETING', value: 'hi there' }] },
      { op: 'run', command: 'bash', args: ['-c', 'printf "%0100d" 0'], outputByteLimit: 10 },
    ])
    // The command is the parent's child process, in the parent's directory.
    expect(lines[0]).toBe(`ran terminal-1: exit 0 ${JSON.stringify(`ppid=${process.pid} cwd=${dir}\n`)}`)
    expect(lines[1]).toBe('ran terminal-2: exit 0 "a b|it\'s|"')
    expect(lines[2]).toBe('run refused: -32003 bash touch refused-ran was refused: permission denied by the test user: no')
    expect(existsSync(join(dir, 'refused-ran'))).toBe(false)
    expect(lines[3]).toMatch(/^run refused: -32602 .* is outside the working directory /)
    expect(lines[4]).toBe('ran terminal-3: exit 0 "hi there\\n"')
    expect(lines[5]).toBe('ran terminal-4: exit 0 "0000000000" (truncated)')
    // Asked as rules see them: bash -c X is X, other commands quoted, variables first.
    expect(asked.map((request) => request.subject)).toEqual([
      'echo "ppid=$PPID cwd=$(pwd)"',
      "printf '%s|' 'a b' 'it'\\''s'",
      'touch refused-ran',
      "GREETING='hi there' echo $GREETING",
      'printf "%0100d" 0',
    ])
    expect(asked.every((request) => request.tool === 'bash' && request.kind === 'execute' && request.path.at(-1) === 'acp "editor"')).toBe(true)
  })

  it('an agent that asked first (session/request_permission) and was allowed is not asked again for that write or command, once', async () => {
    const setupDone = await shared(fixtureAgent())
    const { dir, asked } = setupDone
    const target = join(dir, 'notes.md')
    const { lines } = await runSteps(setupDone, [
      { op: 'ask', kind: 'edit', rawInput: { path: target } },
      { op: 'write', path: target, content: 'first\n' },
      { op: 'write', path: target, content: 'second\n' },
      { op: 'ask', kind: 'execute', rawInput: { command: 'touch asked-once' } },
      { op: 'run', command: 'bash', args: ['-c', 'touch asked-once'] },
    ])
    expect(lines).toEqual(['asked: yes', `wrote ${target}`, `wrote ${target}`, 'asked: yes', 'ran terminal-1: exit 0 ""'])
    expect(existsSync(join(dir, 'asked-once'))).toBe(true)
    // The ask, its write unasked; the second write asked again (as a write, by its name); the command's ask, its command unasked.
    expect(asked.map((request) => `${request.tool} ${request.subject}`)).toEqual([`edit ${target}`, 'write notes.md', 'bash touch asked-once'])
  })

  it('an allowed ask about a link (notes.txt, to Makefile) grants no write of the file it points to: the write is asked about by its real name', async () => {
    const setupDone = await shared(fixtureAgent())
    const { dir, asked, answer } = setupDone
    writeFileSync(join(dir, 'Makefile'), 'all:\n')
    symlinkSync('Makefile', join(dir, 'notes.txt'))
    // As config allow: [edit(notes.txt)], deny: [write(Makefile)] would answer.
    answer.next = (request) => (request.subject === 'Makefile' ? { decision: 'reject', by: 'the test user', reason: 'not the Makefile' } : { decision: 'allow-once', by: 'the test user' })
    const { lines } = await runSteps(setupDone, [
      { op: 'ask', kind: 'edit', rawInput: { path: join(dir, 'notes.txt') } },
      { op: 'write', path: join(dir, 'notes.txt'), content: 'PWNED\n' },
    ])
    expect(lines).toEqual(['asked: yes', 'write refused: -32003 write Makefile was refused: permission denied by the test user: not the Makefile'])
    expect(readFileSync(join(dir, 'Makefile'), 'utf8')).toBe('all:\n')
    expect(asked.map((request) => `${request.tool} ${request.subject}`)).toEqual([`edit ${join(dir, 'notes.txt')}`, 'write Makefile'])
  })

  it('a directory swapped for a link to one outside while the parent decides the write is refused, and nothing is written outside (an existing directory, and a missing one)', async () => {
    const outside = tempDir('acp-shared-outside-')
    const setupDone = await shared(fixtureAgent())
    const { dir, answer } = setupDone
    mkdirSync(join(dir, 'sub'))
    // The front-end answers only once the agent's race is won: the directory is a link to outside.
    answer.next = (request) => {
      const swapped = request.subject.startsWith('sub') ? 'sub' : 'newdir'
      if (swapped === 'sub') renameSync(join(dir, 'sub'), join(dir, 'sub-before'))
      symlinkSync(outside, join(dir, swapped))
      return { decision: 'allow-once', by: 'the test user' }
    }
    const { lines } = await runSteps(setupDone, [
      { op: 'write', path: join(dir, 'sub', 'toctou.txt'), content: 'raced\n' },
      { op: 'write', path: join(dir, 'newdir', 'toctou.txt'), content: 'raced\n' },
    ])
    expect(lines).toHaveLength(2)
    // Judged again once allowed: the path now leads outside.
    expect(lines[0]).toMatch(/^write refused: -32602 .*sub\/toctou\.txt is outside the working directory .*through a symbolic link/)
    expect(lines[1]).toMatch(/^write refused: -32602 .*newdir\/toctou\.txt is outside the working directory .*through a symbolic link/)
    expect(readdirSync(outside)).toEqual([])
  })

  it('holds at most maxTerminals open, and kills what the agent left running when the run is disposed', async () => {
    const before = liveChildren()
    const setupDone = await shared({ ...fixtureAgent(), maxTerminals: 2 })
    const { dir } = setupDone
    const { lines } = await runSteps(setupDone, [
      { op: 'start', command: 'bash', args: ['-c', 'echo $$ > one.pid; exec sleep 600'] },
      { op: 'start', command: 'bash', args: ['-c', 'echo $$ > two.pid; exec sleep 600'] },
      { op: 'until', path: join(dir, 'one.pid') },
      { op: 'until', path: join(dir, 'two.pid') },
      { op: 'start', command: 'bash', args: ['-c', 'touch three'] },
    ])
    expect(lines.slice(0, 4)).toEqual(['started terminal-1', 'started terminal-2', `found ${join(dir, 'one.pid')}`, `found ${join(dir, 'two.pid')}`])
    expect(lines[4]).toContain('already holds 2 terminals, the most it may (maxTerminals)')
    expect(existsSync(join(dir, 'three'))).toBe(false)
    // Disposed by runSteps: the two sleepers are gone.
    for (const name of ['one.pid', 'two.pid']) expect(isAlive(Number(readFileSync(join(dir, name), 'utf8')))).toBe(false)
    expect(liveChildren()).toEqual(before)
  })

  it('cancelling the run kills its terminals, and nothing is left running', async () => {
    const before = liveChildren()
    const { harness, request, dir } = await shared(fixtureAgent())
    const run = await harness.ctx.subagents.start('acp', request(JSON.stringify([{ op: 'run', command: 'bash', args: ['-c', 'echo $$ > sleeper.pid; exec sleep 600'] }])))
    const pid = await waitFor(() => {
      const text = existsSync(join(dir, 'sleeper.pid')) ? readFileSync(join(dir, 'sleeper.pid'), 'utf8') : ''
      return text.endsWith('\n') ? Number(text) : undefined
    }, 15_000)
    expect(isAlive(pid)).toBe(true)
    run.cancel()
    const result = await run.result
    expect(result.stopReason).toBe('aborted')
    expect(isAlive(pid)).toBe(false)
    // The agent saw its command end when the turn was stopped.
    expect(textOf(result.output)).toMatch(/^ran terminal-1: exit SIGTERM ""/)
    await run.dispose()
    expect(liveChildren()).toEqual(before)
  })

  it('without sharedWorkspace the agent is offered nothing, and fs requests are not served', async () => {
    const setupDone = await shared({ ...fixtureAgent(), sharedWorkspace: false })
    const { dir } = setupDone
    writeFileSync(join(dir, 'a.txt'), 'a\n')
    const { lines } = await runSteps(setupDone, [{ op: 'capabilities' }, { op: 'read', path: join(dir, 'a.txt') }, { op: 'write', path: join(dir, 'a.txt'), content: 'b' }])
    expect(lines[0]).toBe('capabilities: {"fs":{"readTextFile":false,"writeTextFile":false},"terminal":false}')
    expect(lines[1]).toMatch(/^read refused: -32601 /)
    expect(lines[2]).toMatch(/^write refused: -32601 /)
    expect(readFileSync(join(dir, 'a.txt'), 'utf8')).toBe('a\n')
  })
})

describe('acp shared workspace: dsh acp as the child', () => {
  let script: string
  beforeAll(() => {
    if (!existsSync(dshMain)) throw new Error(`${dshMain} is missing: build first (npm run build)`)
    script = join(tempDir('acp-shared-script-'), 'child.yml')
    writeFileSync(
      script,
      [
        '- when: { prompt: "^record" }',
        '  reply:',
        '    - call: { tool: bash, args: { command: "echo \\"ppid=$PPID cwd=$(pwd)\\" > through-parent.txt" } }',
        '    - text: "child: {{last_tool_result}}"',
      ].join('\n'),
    )
  })

  function dshChild(permission: 'ask' | 'allow'): Partial<AcpProviderConfig> & { command: string } {
    return { command: process.execPath, args: [dshMain, 'acp', '--model', `scripted:${script}`, '--session-dir', tempDir('acp-shared-sessions-'), '--permission', permission] }
  }

  const COMMAND = 'echo "ppid=$PPID cwd=$(pwd)" > through-parent.txt'

  it('its bash command runs through the parent\'s terminal, in the parent\'s directory, after the parent\'s front-end was asked once naming the child', async () => {
    const setupDone = await shared(dshChild('ask'))
    const { harness, request, dir, asked } = setupDone
    const run = await harness.ctx.subagents.start('acp', request('record where you run', { label: 'recorder' }))
    const result = await run.result
    await run.dispose()
    expect(result.stopReason).toBe('completed')
    expect(textOf(result.output)).toContain('child: exit code 0')
    // Its shell's parent is this process, not the dsh acp child: it ran on the parent's side.
    expect(readFileSync(join(dir, 'through-parent.txt'), 'utf8')).toBe(`ppid=${process.pid} cwd=${dir}\n`)
    // The child's broker asked its client (the parent), which asked its front-end; the
    // terminal that followed used that answer instead of asking again.
    expect(asked.map((entry) => ({ tool: entry.tool, subject: entry.subject, who: entry.path.at(-1) }))).toEqual([{ tool: 'bash', subject: COMMAND, who: 'acp "recorder"' }])
  })

  it('a command the parent\'s front-end rejects does not run', async () => {
    const setupDone = await shared(dshChild('ask'))
    const { harness, request, dir, asked, answer } = setupDone
    answer.next = () => ({ decision: 'reject', by: 'the test user', reason: 'not now' })
    const run = await harness.ctx.subagents.start('acp', request('record where you run', { label: 'recorder' }))
    const result = await run.result
    await run.dispose()
    expect(textOf(result.output)).toContain('permission denied')
    expect(existsSync(join(dir, 'through-parent.txt'))).toBe(false)
    expect(asked).toHaveLength(1)
  })

  // A dsh acp child started with --permission allow under a parent does not allow on its own
  // (its lineage bounds it): it asks up the tree, and the parent's refusal runs nothing.
  it('a child started with dsh acp --permission allow still has its command asked of the parent, and a refusal runs nothing', async () => {
    const setupDone = await shared(dshChild('allow'))
    const { harness, request, dir, asked, answer } = setupDone
    answer.next = () => ({ decision: 'reject', by: 'the test user', reason: 'the parent says no' })
    const run = await harness.ctx.subagents.start('acp', request('record where you run', { label: 'recorder' }))
    const result = await run.result
    await run.dispose()
    expect(asked.map((entry) => ({ tool: entry.tool, subject: entry.subject, who: entry.path.at(-1) }))).toEqual([{ tool: 'bash', subject: COMMAND, who: 'acp "recorder"' }])
    expect(existsSync(join(dir, 'through-parent.txt'))).toBe(false)
    expect(textOf(result.output)).toContain('bash was not run: permission denied')
    expect(textOf(result.output)).toContain('the parent says no')
  })
})
