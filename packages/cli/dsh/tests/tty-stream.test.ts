/**
 * `dsh run` on a terminal (tmux): the root's text shows as it arrives, above the live tree;
 * the tree is coloured unless NO_COLOR or --no-color says not to; and a warning logged
 * while the tree is live is written above it, so the final screen holds no stale line.
 */
import { writeFileSync } from 'node:fs'
import { join } from 'node:path'
import { afterAll, afterEach, describe, expect, it } from 'vitest'
import { tmuxServer } from './tmux.js'
import { startFakeOpenAIChat, type FakeOpenAIChat } from '@dsh/testkit'
import { dshBin, repoRoot, tempDir } from './cli.js'

const session = `dsh-tty-stream-${process.pid}`
const { tmux, stop: stopTmux } = tmuxServer(session)
afterAll(stopTmux)
const screen = () => tmux('capture-pane', '-p', '-t', session)
/** The screen with its colours, as tmux writes them back (SGR sequences). */
const paintedScreen = () => tmux('capture-pane', '-p', '-e', '-t', session)

/**
 * The screen once `check` holds. Gives up when the run has ended (its EXIT= line is drawn)
 * without the screen matching, never after a fixed time: a busy machine draws late, not wrong.
 */
async function until(check: (text: string) => boolean): Promise<string> {
  for (;;) {
    const text = screen()
    if (check(text)) return text
    if (text.includes('EXIT=')) throw new Error(`the run ended without the screen matching; last screen:\n${text}`)
    await new Promise((resolve) => setTimeout(resolve, 50))
  }
}

/** `dsh run ARGS go` in a fresh tmux window of 160 by 40, in `dir`, with `env` set. */
function start(dir: string, args: string[], env: Record<string, string> = {}): void {
  const command = [process.execPath, dshBin, 'run', '--session-dir', dir, ...args, 'go'].map((part) => `'${part}'`).join(' ')
  const vars = Object.entries({ DSH_HOME: dir, DEEPSEEK_API_KEY: '', OPENAI_API_KEY: '', ...env }).map(([name, value]) => `${name}='${value}'`).join(' ')
  tmux('new-session', '-d', '-s', session, '-x', '160', '-y', '40', `cd '${dir}' && env -u NO_COLOR ${vars} ${command}; echo EXIT=$?; sleep 30`)
}

let fake: FakeOpenAIChat | undefined
afterEach(async () => {
  try {
    tmux('kill-session', '-t', session)
  } catch {
    // already gone: the test ended it or it never started
  }
  await fake?.close()
  fake = undefined
})

/** A parent that delegates once and answers. */
function delegation(dir: string): string {
  const file = join(dir, 'script.yml')
  writeFileSync(file, ['- when: { depth: 1 }', '  reply: [{ text: "child done" }]', '- when: { depth: 0 }', '  reply:', '    - call: { tool: subagent, args: { description: "helper", prompt: "help" } }', '    - text: "all done"'].join('\n'))
  return file
}

const SGR = /\x1b\[[0-9;]*m/

describe('dsh run on a terminal', () => {
  it('shows the first piece of the answer above the running tree while the model still holds the rest', async () => {
    const dir = tempDir()
    fake = await startFakeOpenAIChat([{ text: ['first piece ', 'and the rest of the answer'], hangAfterChunks: 2 }])
    const config = join(dir, 'dsh.yml')
    writeFileSync(config, ['- id: llm-fake', '  name: "@dsh/llm-openai"', `  config: { name: fake, baseURL: "${fake.url}", apiKeyEnv: FAKE_MODEL_AUTH, model: fake-model }`].join('\n'))
    start(dir, ['--config', config, '--model', 'fake'], { FAKE_MODEL_AUTH: 'loopback' })
    const live = (await until((text) => text.includes('first piece'))).split('\n')
    const piece = live.findIndex((line) => line.startsWith('first piece'))
    const tree = live.findIndex((line) => /^… dsh {2}running/.test(line))
    // The turn is still running (the model holds the rest), and the tree is drawn below the text.
    expect(tree).toBeGreaterThan(piece)
    expect(live.join('\n')).not.toContain('and the rest')
    tmux('send-keys', '-t', session, 'C-c')
    const done = await until((text) => text.includes('EXIT='))
    expect(done).toContain('EXIT=130')
    expect(done.split('\n').filter((line) => line.startsWith('first piece'))).toHaveLength(1)
  })

  it('colours the tree on a terminal, and not with NO_COLOR or --no-color', async () => {
    for (const [extra, env, painted] of [[[], {}, true], [[], { NO_COLOR: '1' }, false], [['--no-color'], {}, false]] as const) {
      const dir = tempDir()
      start(dir, ['--config', join(repoRoot, 'examples/delegate.yml'), '--model', `scripted:${delegation(dir)}`, ...extra], env)
      const done = await until((text) => text.includes('EXIT='))
      expect(done).toContain('EXIT=0')
      expect(done).toMatch(/^✓ dsh {2}done/m)
      expect(done).toContain('all done')
      const colours = paintedScreen()
      if (painted) {
        // The done mark in green, the tool call in cyan.
        expect(colours).toMatch(/\x1b\[32m✓/)
        expect(colours).toMatch(/\x1b\[36m→ subagent/)
      } else expect(colours, JSON.stringify({ extra, env })).not.toMatch(SGR)
      tmux('kill-session', '-t', session)
    }
  })

  it('a budget warning logged while the tree is live is written above it: no stale tree line or broken warning remains', async () => {
    const dir = tempDir()
    const config = join(dir, 'dsh.yml')
    // A children budget of 2 warned at half: the first child's start warns.
    writeFileSync(config, '- id: subagents\n  name: "@dsh/subagent"\n  config: { tree: { budget: { children: 2, warnAt: 0.5 } } }\n')
    const script = join(dir, 'script.yml')
    writeFileSync(script, [
      '- when: { depth: 1 }',
      '  reply:',
      '    - call: { tool: bash, args: { command: "until [ -e gate ]; do sleep 0.05; done" } }',
      '    - text: "child done"',
      '- when: { depth: 0 }',
      '  reply:',
      '    - call: { tool: subagent, args: { description: "slow", prompt: "wait" } }',
      '    - text: "all done"',
    ].join('\n'))
    start(dir, ['--permission', 'allow', '--config', config, '--model', `scripted:${script}`])
    // The warning is on screen while the child is still waiting at its gate.
    await until((text) => text.includes('budget warning') && /"slow" {2}running .*bash until/.test(text))
    writeFileSync(join(dir, 'gate'), '')
    const done = await until((text) => text.includes('EXIT='))
    expect(done).toContain('EXIT=0')
    const lines = done.split('\n')
    // One tree, as it ended: no running line of an earlier frame left behind.
    expect(lines.filter((line) => /^. dsh {2}/.test(line))).toEqual([expect.stringMatching(/^✓ dsh {2}done/)])
    expect(lines.filter((line) => /"slow"/.test(line) && /^└─/.test(line))).toEqual([expect.stringMatching(/^└─ ✓ spawn \S+ "slow" {2}done/)])
    expect(lines.filter((line) => /^(. dsh|└─ . spawn) .* running /.test(line)), done).toEqual([])
    // The warning, whole, once (the log's line; the tree's own note of it is not repeated).
    const warning = lines.filter((line) => line.includes('budget warning'))
    expect(warning).toHaveLength(1)
    expect(done.replace(/\n/g, '')).toContain('the delegation tree has used 50% of its children budget')
  })
})
