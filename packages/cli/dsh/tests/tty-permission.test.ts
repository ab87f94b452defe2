/**
 * `dsh run` on a terminal (tmux): side-effecting calls are asked about at the root, naming
 * the agent that wants them, one prompt at a time and without breaking the live tree; and
 * the Ctrl-C notice is drawn above the tree, not under a frame the next redraw mistakes.
 */
import { existsSync, writeFileSync } from 'node:fs'
import { join } from 'node:path'
import { afterAll, afterEach, describe, expect, it } from 'vitest'
import { tmuxServer } from './tmux.js'
import { dshBin, repoRoot, tempDir } from './cli.js'

const session = `dsh-tty-permission-${process.pid}`
const { tmux, stop: stopTmux } = tmuxServer(session)
afterAll(stopTmux)
const screen = () => tmux('capture-pane', '-p', '-t', session)

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

function start(dir: string, script: string, extra: string[] = []): void {
  const command = [process.execPath, dshBin, 'run', '--config', join(repoRoot, 'examples/delegate.yml'), '--model', `scripted:${script}`, '--session-dir', dir, ...extra, 'go']
    .map((part) => `'${part}'`)
    .join(' ')
  tmux('new-session', '-d', '-s', session, '-x', '160', '-y', '40', `cd ${dir} && env DSH_HOME=${dir} ${command}; echo EXIT=$?; sleep 30`)
}

afterEach(() => {
  try {
    tmux('kill-session', '-t', session)
  } catch {
    // already gone
  }
})

describe('dsh run asks on a terminal', () => {
  it('asks at the root for a child\'s command naming its agent path; "always" lets the identical call through unasked; a rejected one is not run', async () => {
    const dir = tempDir()
    const script = join(dir, 'script.yml')
    writeFileSync(script, [
      '- when: { prompt: "make the marker" }',
      '  reply:',
      '    - call: { tool: bash, args: { command: "touch child-ran" } }',
      '    - call: { tool: bash, args: { command: "touch child-ran" } }',
      '    - call: { tool: bash, args: { command: "touch child-again" } }',
      '    - text: "child finished"',
      '- when: { depth: 0 }',
      '  reply:',
      '    - call: { tool: subagent, args: { description: "marker maker", prompt: "make the marker" } }',
      '    - call: { tool: bash, args: { command: "touch root-ran" } }',
      '    - text: "root finished: {{last_tool_result}}"',
    ].join('\n'))
    start(dir, script)

    const first = await until((text) => text.includes('[y] allow once'))
    expect(first).toContain('dsh › spawn "marker maker" wants to run bash: touch child-ran')
    await new Promise((resolve) => setTimeout(resolve, 200)) // a person reads the prompt before answering: keys typed sooner are ignored
    tmux('send-keys', '-t', session, 'a')
    // The identical call went through unasked; the next, different one is asked about.
    const second = await until((text) => text.includes('wants to run bash: touch child-again') && text.includes('[y] allow once'))
    expect(existsSync(join(dir, 'child-ran'))).toBe(true)
    expect(second.match(/wants to run bash: touch child-ran/g)).toHaveLength(1)
    await new Promise((resolve) => setTimeout(resolve, 200)) // a person reads the prompt before answering: keys typed sooner are ignored
    tmux('send-keys', '-t', session, 'n')
    const third = await until((text) => text.includes('dsh wants to run bash: touch root-ran') && text.includes('[y] allow once'))
    expect(third).toContain('touch child-again → rejected')
    await new Promise((resolve) => setTimeout(resolve, 200)) // a person reads the prompt before answering: keys typed sooner are ignored
    tmux('send-keys', '-t', session, 'y')
    const done = await until((text) => text.includes('EXIT='))
    expect(done).toContain('EXIT=0')
    expect(existsSync(join(dir, 'child-again'))).toBe(false)
    expect(existsSync(join(dir, 'root-ran'))).toBe(true)
    // The tree was redrawn around the prompts: one copy of it is left, with the child done.
    const lines = done.split('\n')
    expect(lines.filter((line) => line.includes('"marker maker"  done'))).toHaveLength(1)
    expect(lines.find((line) => /^✓ dsh {2}done/.test(line))).toBeDefined()
  })

  it('Ctrl-C at a prompt rejects the call and cancels the run; the notice stands above one copy of the tree', async () => {
    const dir = tempDir()
    const script = join(dir, 'script.yml')
    writeFileSync(script, [
      '- when: { prompt: "slow child" }',
      '  reply: [{ text: "never seen", delay_ms: 60000 }]',
      '- when: { depth: 0 }',
      '  reply:',
      '    - calls:',
      '        - { tool: subagent, args: { description: "sleeper", prompt: "slow child", run_in_background: true } }',
      '    - call: { tool: bash, args: { command: "touch root-ran" } }',
      '    - text: "unreachable"',
    ].join('\n'))
    start(dir, script)
    await until((text) => text.includes('[y] allow once'))
    await new Promise((resolve) => setTimeout(resolve, 200)) // a person reads the prompt before answering: keys typed sooner are ignored
    tmux('send-keys', '-t', session, 'C-c')
    const done = await until((text) => text.includes('EXIT='))
    expect(done).toContain('EXIT=130')
    expect(existsSync(join(dir, 'root-ran'))).toBe(false)
    const lines = done.split('\n')
    // The tree's line of the child (the root's tool-call line above the tree quotes the label too).
    const childLine = (line: string) => /^[├└]─ .*"sleeper"/.test(line)
    expect(lines.filter(childLine)).toHaveLength(1)
    const notice = lines.findIndex((line) => line.includes('dsh: cancelling (Ctrl-C again to exit now)'))
    const tree = lines.findIndex(childLine)
    expect(notice).toBeGreaterThanOrEqual(0)
    expect(notice).toBeLessThan(tree)
  })
})
