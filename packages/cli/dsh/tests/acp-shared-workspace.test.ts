/**
 * A shared workspace over ACP, through the built dsh on a terminal (tmux), in a git
 * repository the test makes: the `acp` provider configured `sharedWorkspace: true` serves
 * its child's fs and terminal in the parent's tree. A third-party ACP agent (the provider's
 * test fixture, on the official SDK) edits a file of the tree through `fs/write_text_file`
 * after `dsh run` asked the user about it, naming the child, and its write outside the
 * tree is refused unasked; a `dsh acp` child's command runs in the `dsh run` process's
 * terminal, asked about once.
 */
import { execFileSync } from 'node:child_process'
import { existsSync, readdirSync, readFileSync, realpathSync, writeFileSync } from 'node:fs'
import { join } from 'node:path'
import { afterAll, afterEach, describe, expect, it } from 'vitest'
import { tmuxServer } from './tmux.js'
import { dshBin, repoRoot, tempDir } from './cli.js'

const session = `dsh-acp-shared-${process.pid}`
const { tmux, stop: stopTmux } = tmuxServer(session)
afterAll(stopTmux)
const screen = () => tmux('capture-pane', '-p', '-J', '-S', '-200', '-t', session)
const agentFixture = join(repoRoot, 'packages/subagent/subagent-acp/tests/fixtures/agent.mjs')

async function until(check: (text: string) => boolean, timeoutMs = 30_000): Promise<string> {
  const deadline = Date.now() + timeoutMs
  let text = ''
  while (Date.now() < deadline) {
    text = screen()
    if (check(text)) return text
    await new Promise((resolve) => setTimeout(resolve, 50))
  }
  throw new Error(`the screen never matched; last screen:\n${text}`)
}

afterEach(() => {
  try {
    tmux('kill-session', '-t', session)
  } catch {
    // already gone
  }
})

/** A git repository with one committed file, made for the test. */
function repository(): string {
  const dir = realpathSync(tempDir('dsh-acp-shared-'))
  const git = (...args: string[]) => execFileSync('git', args, { cwd: dir, encoding: 'utf8' })
  git('init', '-q', '-b', 'main')
  writeFileSync(join(dir, 'app.txt'), 'version 1\n')
  git('add', 'app.txt')
  git('-c', 'user.name=test', '-c', 'user.email=test@example.com', 'commit', '-q', '-m', 'start')
  return dir
}

/** A composition whose acp provider shares the parent's workspace with `command args`. */
function composition(dir: string, command: string, args: string[]): string {
  const config = join(dir, '.dsh-test.yml')
  writeFileSync(config, [
    '- id: subagent-acp',
    '  name: "@dsh/subagent-acp"',
    '  config:',
    '    providerName: acp',
    `    command: ${JSON.stringify(command)}`,
    `    args: ${JSON.stringify(args)}`,
    '    sharedWorkspace: true',
    '- id: tool-subagent-acp',
    '  name: "@dsh/tool-subagent"',
    '  config: { provider: acp, toolName: subagent_acp }',
  ].join('\n'))
  return config
}

/** Start `dsh run` on a tmux terminal in `dir`; its sessions go to `dir/.sessions`. */
function startOnTerminal(dir: string, config: string, script: string): void {
  const command = [process.execPath, dshBin, 'run', '--config', config, '--model', `scripted:${script}`, '--session-dir', join(dir, '.sessions'), 'go'].map((part) => `'${part}'`).join(' ')
  tmux('new-session', '-d', '-s', session, '-x', '250', '-y', '50', `cd ${dir} && env DSH_HOME=${join(dir, '.home')} ${command}; echo EXIT=$?; sleep 30`)
}

/** Answer every question on screen with `key` until dsh exits; returns the questions answered, in order. */
async function answerAll(key: string): Promise<{ asked: string[]; screen: string }> {
  const lines = (text: string) => text.split('\n').filter((line) => line.includes(' wants to run '))
  // A question is open while the last one shown has no answer after its arrow yet.
  const open = (text: string) => {
    const last = lines(text).at(-1)
    return last !== undefined && !last.includes(' → ') && text.includes('[y] allow once')
  }
  const answered = (text: string) => lines(text).filter((line) => line.includes(' → ')).map((line) => line.slice(0, line.indexOf(' → ')).trim())
  for (;;) {
    const text = await until((shown) => open(shown) || shown.includes('EXIT='))
    if (text.includes('EXIT=')) return { asked: answered(text), screen: text }
    const before = answered(text).length
    await new Promise((resolve) => setTimeout(resolve, 200)) // a person reads the prompt before answering: keys typed sooner are ignored
    tmux('send-keys', '-t', session, key)
    await until((shown) => answered(shown).length > before || shown.includes('EXIT='))
  }
}

/** The parent's session events (the one session without a parent). */
function rootEvents(dir: string): Array<Record<string, unknown>> {
  const sessions = join(dir, '.sessions')
  for (const name of readdirSync(sessions).filter((file) => file.endsWith('.jsonl'))) {
    const [head, ...rest] = readFileSync(join(sessions, name), 'utf8').trim().split('\n').map((line) => JSON.parse(line) as Record<string, unknown>)
    if ((head!.header as { parentSession?: string }).parentSession === undefined) return rest
  }
  throw new Error('no root session')
}

describe('a shared workspace over ACP, through dsh run', () => {
  it('a third-party ACP agent edits a file of the parent\'s tree through fs/write_text_file after the user was asked about it, and its write outside the tree is refused unasked', async () => {
    const dir = repository()
    const outside = join(dir, '..', `outside-${process.pid}.txt`)
    const steps = [
      { op: 'read', path: join(dir, 'app.txt') },
      { op: 'write', path: join(dir, 'app.txt'), content: 'version 2\n' },
      { op: 'write', path: outside, content: 'escaped\n' },
    ]
    const script = join(dir, '.script.yml')
    writeFileSync(script, [
      '- when: { depth: 0 }',
      '  reply:',
      `    - call: { tool: subagent_acp, args: { description: editor, prompt: ${JSON.stringify(JSON.stringify(steps))} } }`,
      '    - text: "root: {{last_tool_result}}"',
    ].join('\n'))
    startOnTerminal(dir, composition(dir, process.execPath, [agentFixture, 'shared']), script)
    const { asked, screen: done } = await answerAll('y')
    expect(done).toContain('EXIT=0')
    expect(asked).toEqual(['dsh › acp "editor" wants to run write: app.txt'])
    expect(readFileSync(join(dir, 'app.txt'), 'utf8')).toBe('version 2\n')
    expect(existsSync(outside)).toBe(false)
    // The child said what it read, what it wrote and what was refused.
    expect(done).toContain('read: "version 1\\n"')
    expect(done).toContain(`wrote ${join(dir, 'app.txt')}`)
    expect(done).toMatch(/write refused: -32602 .* is outside the working directory/)
    // git sees the edit in the parent's own tree.
    expect(execFileSync('git', ['status', '--porcelain', 'app.txt'], { cwd: dir, encoding: 'utf8' })).toBe(' M app.txt\n')
    // The decision is recorded in the parent's session, naming the child.
    const approval = rootEvents(dir).find((event) => event.type === 'approval')
    expect(approval).toMatchObject({ request: { tool: 'write', subject: 'app.txt', path: ['dsh', 'acp "editor"'] }, permission: { decision: 'allow-once', by: 'the user at the terminal', source: 'user' } })
  })

  it('a dsh acp child\'s command runs in the dsh run process, in the parent\'s tree, asked about once; rejected, it does not run', async () => {
    for (const [key, ran] of [['y', true], ['n', false]] as const) {
      const dir = repository()
      const childScript = join(dir, '.child.yml')
      writeFileSync(childScript, [
        '- when: { prompt: "^where" }',
        '  reply:',
        // The shell's parent process is whoever ran it: its command line says which dsh that was.
        "    - call: { tool: bash, args: { command: \"tr '\\\\000' ' ' < /proc/$PPID/cmdline > ran-by.txt\" } }",
        '    - text: "child: {{last_tool_result}}"',
      ].join('\n'))
      const script = join(dir, '.script.yml')
      writeFileSync(script, ['- when: { depth: 0 }', '  reply:', '    - call: { tool: subagent_acp, args: { description: runner, prompt: "where do you run" } }', '    - text: "root: {{last_tool_result}}"'].join('\n'))
      startOnTerminal(dir, composition(dir, process.execPath, [dshBin, 'acp', '--model', `scripted:${childScript}`, '--session-dir', join(dir, '.sessions')]), script)
      const { asked, screen: done } = await answerAll(key)
      expect(done).toContain('EXIT=0')
      expect(asked).toEqual([`dsh › acp "runner" wants to run bash: tr '\\000' ' ' < /proc/$PPID/cmdline > ran-by.txt`])
      expect(existsSync(join(dir, 'ran-by.txt'))).toBe(ran)
      if (ran) {
        const ranBy = readFileSync(join(dir, 'ran-by.txt'), 'utf8')
        expect(ranBy).toContain(' run ')
        expect(ranBy).not.toContain(' acp ')
      }
      tmux('kill-session', '-t', session)
    }
  })
})
