/**
 * `dsh chat` without a terminal, through the built CLI: prompts piped to standard input, one
 * a line, each turn's text streamed to stdout, slash commands answered there, approvals by
 * the pipe's policy (refused unless --permission allow, never asked), the session resumable
 * with --resume, and bad input one line on stderr with the session going on and exit 1.
 * Waits are for output, never for a time.
 */
import { spawn } from 'node:child_process'
import { existsSync, readdirSync, readFileSync, writeFileSync } from 'node:fs'
import { join } from 'node:path'
import { afterEach, describe, expect, it } from 'vitest'
import { startFakeOpenAIChat, type FakeOpenAIChat } from '@dsh/testkit'
import { dshBin, repoRoot, runDsh, tempDir } from './cli.js'
import { until } from './processes.js'

let fake: FakeOpenAIChat | undefined
afterEach(async () => {
  await fake?.close()
  fake = undefined
})

function script(dir: string, lines: string[]): string {
  const file = join(dir, 'script.yml')
  writeFileSync(file, lines.join('\n'))
  return file
}

interface StoredEvent {
  type: string
  message?: { content: { type: string; text?: string }[] }
  reason?: string
}

/** The events of the root session stored in `dir` (the one without a parent), and its id. */
function rootSession(dir: string): { id: string; events: StoredEvent[] } {
  for (const name of readdirSync(dir).filter((file) => file.endsWith('.jsonl'))) {
    const [first, ...events] = readFileSync(join(dir, name), 'utf8').trim().split('\n').map((line) => JSON.parse(line) as unknown)
    const header = (first as { header?: { id: string; parentSession?: string } }).header
    if (header && header.parentSession === undefined) return { id: header.id, events: events as StoredEvent[] }
  }
  throw new Error(`no root session in ${dir}`)
}

const userPrompts = (events: StoredEvent[]) => events.filter((event) => event.type === 'user/message').map((event) => event.message!.content.map((block) => block.text ?? '').join(''))

describe('dsh chat from a pipe', () => {
  it('runs one turn a line with its answer on stdout, answers /tree and /cost there, leaves at /exit unread, and --resume goes on with the earlier turn', async () => {
    const dir = tempDir()
    const sessions = join(dir, 'sessions')
    const file = script(dir, [
      '- when: { prompt: "^help" }',
      '  reply:',
      '    - text: "child done"',
      '- when: { depth: 0 }',
      '  reply:',
      '    - call: { tool: subagent, args: { description: "helper", prompt: "help" } }',
      '    - text: "all done"',
      '    - text: "remembered: {{last_tool_result}}"',
    ])
    const first = await runDsh(['chat', '--model', `scripted:${file}`, '--session-dir', sessions], { cwd: dir, input: 'go\n\n/tree\n/cost\n/exit\nnever sent\n' })
    expect(first.code, first.stderr).toBe(0)
    const { id, events } = rootSession(sessions)
    const lines = first.stdout.split('\n')
    // stdout is the conversation: the answer, then each command's answer, in the order asked.
    expect(lines[0]).toBe('all done')
    expect(lines[1]).toBe(`${id}  cli "go"  completed`)
    expect(lines[2]).toMatch(/^└─ \S+ {2}spawn "helper" {2}completed$/)
    expect(lines[3]).toMatch(new RegExp(`^${id} {2}cli "go" {2}completed {2}\\[in \\d+ / out \\d+ tokens\\]$`))
    expect(lines[4]).toMatch(/^└─ \S+ {2}spawn "helper" {2}completed {2}\[in \d+ \/ out \d+ tokens\]$/)
    expect(lines[5]).toMatch(/^usage of the tree \(2 sessions\)/)
    expect(lines.slice(6)).toEqual([''])
    // The session's own lines are on stderr: which session, and how to go on with it.
    expect(first.stderr).toContain(`dsh · session ${id} · scripted:`)
    expect(first.stderr).toContain(`session ${id} is stored; dsh --resume ${id} goes on with it`)
    expect(userPrompts(events)).toEqual(['go'])

    // A line ending in \ goes on to the next: one prompt of two lines.
    const second = await runDsh(['chat', '--resume', '--session-dir', sessions], { cwd: dir, input: 'what did we do \\\nin one line\n' })
    expect(second.code, second.stderr).toBe(0)
    expect(second.stderr).toContain(`resumed session ${id} (1 earlier turn)`)
    // The model's request holds the earlier turn: its last tool result is the child's answer.
    expect(second.stdout).toBe('remembered: child done\n')
    expect(userPrompts(rootSession(sessions).events)).toEqual(['go', 'what did we do \nin one line'])
  })

  it('streams a turn\'s text to stdout while it runs; SIGINT cancels it and ends the session (130) with the prompts after it unread', async () => {
    const dir = tempDir()
    fake = await startFakeOpenAIChat([{ text: ['first piece ', 'and the rest'], hangAfterChunks: 2 }])
    const config = join(dir, 'dsh.yml')
    writeFileSync(config, ['- id: llm-fake', '  name: "@dsh/llm-openai"', `  config: { name: fake, baseURL: "${fake.url}", apiKeyEnv: FAKE_MODEL_AUTH, model: fake-model }`].join('\n'))
    const child = spawn(process.execPath, [dshBin, 'chat', '--config', config, '--model', 'fake', '--session-dir', dir], {
      cwd: repoRoot,
      env: { ...process.env, DSH_HOME: dir, DEEPSEEK_API_KEY: '', OPENAI_API_KEY: '', FAKE_MODEL_AUTH: 'loopback' },
      stdio: ['pipe', 'pipe', 'pipe'],
    })
    const run = { stdout: '', stderr: '', exit: undefined as number | null | undefined }
    child.stdout.on('data', (chunk: Buffer) => (run.stdout += chunk.toString('utf8')))
    child.stderr.on('data', (chunk: Buffer) => (run.stderr += chunk.toString('utf8')))
    const exited = new Promise<number | null>((resolve) => child.on('close', (code) => resolve((run.exit = code))))
    child.stdin.end('hi\nnever sent\n')
    await until(
      () => run.stdout.includes('first piece'),
      () => (run.exit !== undefined ? `dsh exited ${run.exit} first; stdout: ${run.stdout}; stderr: ${run.stderr}` : undefined),
    )
    // The model holds the rest: the turn still runs, and only its first piece was written.
    expect(run.exit).toBeUndefined()
    expect(run.stdout).toBe('first piece ')
    child.kill('SIGINT')
    expect(await exited).toBe(130)
    expect(run.stderr).toContain('dsh: the turn was cancelled')
    const { id, events } = rootSession(dir)
    expect(run.stderr).toContain(`session ${id} is stored`)
    expect(userPrompts(events)).toEqual(['hi'])
    expect(fake.requests).toHaveLength(1)
  })

  it('refuses what no rule allows, unasked, with one line saying how to allow it; --permission allow runs it; --permission ask is refused in one line', async () => {
    const dir = tempDir()
    const file = script(dir, ['- when: { depth: 0 }', '  reply:', '    - call: { tool: bash, args: { command: "touch made" } }', '    - text: "said: {{last_tool_result}}"'])
    const refused = await runDsh(['chat', '--model', `scripted:${file}`, '--session-dir', join(dir, 'refused')], { cwd: dir, input: 'make it\n' })
    expect(refused.code, refused.stderr).toBe(0)
    expect(existsSync(join(dir, 'made'))).toBe(false)
    expect(refused.stdout).toMatch(/^said: bash was not run: permission denied/)
    expect(refused.stderr).toContain('--permission allow lets them run unasked')

    const allowed = await runDsh(['chat', '--permission', 'allow', '--model', `scripted:${file}`, '--session-dir', join(dir, 'allowed')], { cwd: dir, input: 'make it\n' })
    expect(allowed.code, allowed.stderr).toBe(0)
    expect(existsSync(join(dir, 'made'))).toBe(true)

    // Refused before anything is read or started (its standard input is /dev/null here, not a terminal).
    const ask = await runDsh(['chat', '--permission', 'ask', '--model', `scripted:${file}`, '--session-dir', join(dir, 'ask')], { cwd: dir })
    expect(ask.code).toBe(2)
    expect(ask.stderr.trim()).toBe('dsh chat: --permission ask needs a terminal (standard input and output); without one the prompts come from standard input and nobody can be asked: use --permission allow or reject')
    expect(existsSync(join(dir, 'ask'))).toBe(false)
  })

  it('says in one line each what failed (an unknown command, a failed turn, a prompt past 256 KB), goes on with the next prompt, and exits 1', async () => {
    const dir = tempDir()
    const file = script(dir, ['- when: { depth: 0 }', '  reply:', '    - error: "simulated overload"', '    - text: "still here"'])
    const input = `/cots\nfirst\n${'x'.repeat(300 * 1024)}\nsecond\n`
    const result = await runDsh(['chat', '--model', `scripted:${file}`, '--session-dir', dir], { cwd: dir, input })
    expect(result.code).toBe(1)
    expect(result.stdout).toBe('still here\n')
    expect(result.stderr).toContain('dsh: no command /cots; did you mean /cost?')
    expect(result.stderr).toContain('dsh: the turn ended error: simulated overload')
    expect(result.stderr).toContain('dsh: a prompt of 300 KB was refused: one holds at most 256 KB')
    expect(userPrompts(rootSession(dir).events)).toEqual(['first', 'second'])
  })
})
