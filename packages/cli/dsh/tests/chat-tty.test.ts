/**
 * `dsh` with no command on a terminal (tmux): an interactive session on a scripted model.
 * Its answer streams, a delegation's child shows live, slash commands answer, approvals are
 * asked inline, Ctrl-C cancels a turn and the session goes on, and `dsh --resume` goes on
 * with the stored session, its model seeing the earlier turns. Bad input (a narrow window,
 * a 1 MB paste, bytes that are not UTF-8, an unknown slash command) leaves the session
 * usable. Every wait is for the screen, never for a time.
 */
import { execFileSync } from 'node:child_process'
import { readFileSync, writeFileSync } from 'node:fs'
import { join } from 'node:path'
import { afterAll, afterEach, beforeAll, describe, expect, it } from 'vitest'
import { dshBin, repoRoot, tempDir } from './cli.js'

/** Each test's own tmux session: a wait left behind by a failed test then fails too (its pane is gone) instead of reading the next one's. */
let tests = 0
let session = ''
/**
 * A tmux server of this file's own, kept up by a session that idles from the first test to
 * the last: a server that stops when one test's session goes would refuse the next one's.
 */
const server = `dsh-chat-${process.pid}`
const tmux = (...args: string[]) => execFileSync('tmux', ['-L', server, ...args], { encoding: 'utf8' })
/** The pane with its history, so lines scrolled off a small window are still read. */
const screen = () => tmux('capture-pane', '-p', '-J', '-S', '-200', '-t', session)
const keys = (...args: string[]) => tmux('send-keys', '-t', session, ...args)

/** The screen once `check` holds; gives up when the last command has ended (DONE=) without it. */
async function until(check: (text: string) => boolean): Promise<string> {
  for (;;) {
    const text = screen()
    if (check(text)) return text
    if (text.includes('DONE=')) throw new Error(`the session ended without the screen matching; last screen:\n${text}`)
    await new Promise((resolve) => setTimeout(resolve, 50))
  }
}

/** An empty prompt is the screen's last line: the session waits for input. */
const atPrompt = (text: string) => text.trimEnd().split('\n').at(-1) === '›'

/** Type `line` and Enter once the prompt is up, then wait for the screen to show `after`. */
async function prompt(line: string, after: (text: string) => boolean): Promise<string> {
  await until(atPrompt)
  keys('-l', line)
  keys('Enter')
  return until(after)
}

/** Run `commands` (each a dsh argument list) one after another in a tmux window, in `dir`. */
function start(dir: string, commands: string[][], size: { columns: number; rows: number } = { columns: 120, rows: 40 }): void {
  session = `dsh-chat-${process.pid}-${++tests}`
  const vars = `DSH_HOME='${dir}' DEEPSEEK_API_KEY= OPENAI_API_KEY= ANTHROPIC_API_KEY=`
  const line = commands.map((args, index) => `env -u NO_COLOR ${vars} ${[process.execPath, dshBin, ...args].map((part) => `'${part}'`).join(' ')}; echo EXIT${index + 1}=$?`).join('; ')
  tmux('new-session', '-d', '-s', session, '-x', String(size.columns), '-y', String(size.rows), `cd '${dir}' && ${line}; echo DONE=; sleep 30`)
}

function script(dir: string, lines: string[]): string {
  const file = join(dir, 'script.yml')
  writeFileSync(file, lines.join('\n'))
  return file
}

beforeAll(() => tmux('new-session', '-d', '-s', 'keep', 'sleep 600'))
afterAll(() => tmux('kill-server'))

afterEach(() => {
  try {
    tmux('kill-session', '-t', session)
  } catch {
    // already gone: the test ended it or it never started
  }
})

describe('dsh on a terminal: an interactive session', () => {
  it('streams an answer before its turn ends, shows a child live, answers /tree and /cost, and dsh --resume goes on with the earlier turns', async () => {
    const dir = tempDir()
    const file = script(dir, [
      '- when: { depth: 1 }',
      '  reply:',
      '    - call: { tool: bash, args: { command: "until [ -e gate ]; do sleep 0.05; done; echo child worked" } }',
      '    - text: "child done"',
      '- when: { depth: 0 }',
      '  reply:',
      '    - text: "first piece of the answer"',
      '      call: { tool: subagent, args: { description: "helper", prompt: "help" } }',
      '    - text: "all done"',
      '    - text: "remembered: {{last_tool_result}}"',
    ])
    const common = ['--config', join(repoRoot, 'examples/delegate.yml'), '--session-dir', join(dir, 'sessions'), '--permission', 'allow']
    start(dir, [['--model', `scripted:${file}`, ...common], ['--resume', ...common]])
    // The text of the first step is on screen while its turn still runs (the child waits at its gate).
    const live = await prompt('go', (text) => /^└─ … spawn \S+ "helper" {2}running/m.test(text))
    const lines = live.split('\n')
    expect(lines.findIndex((line) => line.startsWith('first piece of the answer'))).toBeGreaterThan(lines.findIndex((line) => line === '› go'))
    expect(live).toMatch(/^… dsh {2}running/m)
    expect(live).not.toContain('all done')
    writeFileSync(join(dir, 'gate'), '')
    const done = await until((text) => text.includes('all done') && atPrompt(text))
    expect(done).toMatch(/^└─ ✓ spawn \S+ "helper" {2}done/m)

    const tree = await prompt('/tree', (text) => /^└─ \S+ {2}spawn "helper" {2}completed/m.test(text) && atPrompt(text))
    const sessionId = /^(\S+) {2}cli "go" {2}completed$/m.exec(tree)?.[1]
    expect(sessionId).toBeDefined()
    // Per child: the root's line and the child's each carry their own tokens.
    const cost = await prompt('/cost', (text) => text.includes('usage of the tree') && atPrompt(text))
    expect(cost).toMatch(new RegExp(`^${sessionId} {2}cli "go" {2}completed {2}\\[in \\d+ / out \\d+ tokens\\]`, 'm'))
    expect(cost).toMatch(/^└─ \S+ {2}spawn "helper" {2}completed {2}\[in \d+ \/ out \d+ tokens\]/m)

    await prompt('/exit', (text) => text.includes('EXIT1=0'))
    // The second command: dsh --resume, the newest session, on the model it ran on.
    const resumed = await until((text) => text.includes(`resumed session ${sessionId} (1 earlier turn)`) && atPrompt(text))
    expect(resumed).toContain('scripted:')
    // The model's request holds the earlier turn: its last tool result is the child's answer.
    await prompt('what did we do', (text) => /^remembered: .*child done/m.test(text) && atPrompt(text))
    keys('C-d')
    expect(await until((text) => text.includes('DONE='))).toContain('EXIT2=0')
  })

  it('asks an approval inline, and Ctrl-C cancels a running turn while the session goes on', async () => {
    const dir = tempDir()
    const file = script(dir, [
      '- when: { depth: 0 }',
      '  reply:',
      '    - call: { tool: bash, args: { command: "echo approved > out.txt" } }',
      '    - text: "wrote it"',
      '    - { text: "never shown", delay_ms: 600000 }',
      '    - text: "still here"',
    ])
    start(dir, [['--model', `scripted:${file}`, '--session-dir', join(dir, 'sessions')]])
    await prompt('write the file', (text) => text.includes('wants to run bash') && text.includes('[y] allow once'))
    await new Promise((resolve) => setTimeout(resolve, 200)) // a person reads the prompt before answering: keys typed sooner are ignored
    keys('y')
    const written = await until((text) => text.includes('wrote it') && atPrompt(text))
    expect(written).toContain('echo approved > out.txt → allowed once')
    expect(readFileSync(join(dir, 'out.txt'), 'utf8')).toBe('approved\n')

    await prompt('take your time', (text) => /^… dsh {2}running/m.test(text))
    keys('C-c')
    const cancelled = await until((text) => text.includes('the turn was cancelled; the session goes on') && atPrompt(text))
    expect(cancelled).toMatch(/^⊘ dsh {2}cancelled/m)
    expect(cancelled).not.toContain('never shown')
    await prompt('are you there', (text) => text.includes('still here') && atPrompt(text))
    // Ctrl-C at an empty prompt says how to leave; a second one leaves.
    keys('C-c')
    await until((text) => text.includes('(Ctrl-C again, Ctrl-D or /exit to leave)') && atPrompt(text))
    keys('C-c')
    const left = await until((text) => text.includes('DONE='))
    expect(left).toContain('EXIT1=0')
    expect(left).toMatch(/session \S+ is stored; dsh --resume \S+ goes on with it/)
  })

  it('bad input: an unknown slash command, a 1 MB paste, bytes that are not UTF-8 and a 20-column window leave the session usable', async () => {
    const dir = tempDir()
    const file = script(dir, ['- when: { depth: 0 }', '  reply:', '    - text: "answer one"', '    - text: "answer two"', '    - text: "answer three"'])
    start(dir, [['--model', `scripted:${file}`, '--session-dir', join(dir, 'sessions')]])
    await prompt('/cots', (text) => text.includes('dsh: no command /cots; did you mean /cost?') && atPrompt(text))

    // A bracketed paste of 1 MB: refused in one line, nothing of it sent.
    writeFileSync(join(dir, 'big.txt'), `${'x'.repeat(99)}\n`.repeat(10_486))
    await until(atPrompt)
    tmux('load-buffer', '-b', session, join(dir, 'big.txt'))
    tmux('paste-buffer', '-p', '-d', '-b', session, '-t', session)
    const refused = await until((text) => text.includes('dsh: a prompt of 1.0 MB was refused') && atPrompt(text))
    expect(refused).not.toMatch(/^x{99}$/m)
    // A small paste of several lines is one prompt.
    writeFileSync(join(dir, 'small.txt'), 'first pasted line\nsecond pasted line')
    tmux('load-buffer', '-b', session, join(dir, 'small.txt'))
    tmux('paste-buffer', '-p', '-d', '-b', session, '-t', session)
    await until((text) => text.trimEnd().endsWith('… second pasted line'))
    keys('Enter')
    await until((text) => text.includes('answer one') && atPrompt(text))

    // Bytes that are not UTF-8 are shown (and sent) as U+FFFD.
    await until(atPrompt)
    keys('-H', '6f', 'ff', '6b')
    await until((text) => text.trimEnd().endsWith('› o\uFFFDk'))
    keys('Enter')
    await until((text) => text.includes('answer two') && atPrompt(text))

    tmux('resize-window', '-t', session, '-x', '20', '-y', '40')
    await prompt('a prompt typed into a window only twenty columns wide', (text) => text.includes('answer three') && atPrompt(text))
    await prompt('/exit', (text) => text.includes('DONE='))
    const stored = readFileSync(join(dir, 'chat-history.jsonl'), 'utf8').split('\n').filter(Boolean).map((line) => JSON.parse(line) as string)
    // What was sent, each once; the refused paste is not among them.
    expect(stored).toEqual(['/cots', 'first pasted line\nsecond pasted line', 'o\uFFFDk', 'a prompt typed into a window only twenty columns wide', '/exit'])
  })
})
