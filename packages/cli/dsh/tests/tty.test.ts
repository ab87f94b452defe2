import { writeFileSync } from 'node:fs'
import { join } from 'node:path'
import { afterAll, afterEach, describe, expect, it } from 'vitest'
import { tmuxServer } from './tmux.js'
import { dshBin, repoRoot, tempDir } from './cli.js'

const session = `dsh-tty-${process.pid}`
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

afterEach(() => {
  try {
    tmux('kill-session', '-t', session)
  } catch {
    // already gone: the test ended it or it never started
  }
})

describe('live progress on a terminal', () => {
  it('draws a tree of the root and its children in place, then the answer', async () => {
    const dir = tempDir()
    const script = join(dir, 'script.yml')
    writeFileSync(script, [
      '- when: { prompt: "slow one" }',
      '  reply: [{ text: "first child done", delay_ms: 1500 }]',
      '- when: { prompt: "slow two" }',
      '  reply: [{ text: "second child done", delay_ms: 1500 }]',
      '- when: { depth: 0 }',
      '  reply:',
      '    - calls:',
      '        - { tool: subagent, args: { description: "alpha", prompt: "slow one" } }',
      '        - { tool: subagent_fork, args: { description: "beta", prompt: "slow two" } }',
      '    - text: "all done: {{tool_results}}"',
    ].join('\n'))
    const command = [process.execPath, dshBin, 'run', '--config', join(repoRoot, 'examples/delegate.yml'), '--model', `scripted:${script}`, '--session-dir', dir, 'go']
      .map((part) => `'${part}'`)
      .join(' ')
    tmux('new-session', '-d', '-s', session, '-x', '120', '-y', '30', `env DSH_HOME=${dir} ${command}; echo EXIT=$?; sleep 30`)

    // The children's own tree lines (the root's tool-call lines above the tree name them first).
    const live = await until((text) => /^├─ .*"alpha"/m.test(text) && /^└─ .*"beta"/m.test(text))
    const liveLines = live.split('\n')
    expect(liveLines.find((line) => /^… dsh {2}running \d+\.\ds/.test(line))).toBeDefined()
    expect(liveLines.find((line) => /^├─ … spawn \S+ "alpha" {2}running/.test(line))).toBeDefined()
    expect(liveLines.find((line) => /^└─ … fork \S+ "beta" {2}running/.test(line))).toBeDefined()

    const done = await until((text) => text.includes('EXIT='))
    expect(done).toContain('EXIT=0')
    const lines = done.split('\n')
    // redrawn in place: exactly one copy of the tree remains on screen (the root's tool-call line above it quotes the label too)
    expect(lines.filter((line) => /^[├└]─ .*"alpha"/.test(line))).toHaveLength(1)
    expect(lines.filter((line) => /^→ subagent .*alpha/.test(line))).toHaveLength(1)
    expect(lines.find((line) => /^✓ dsh {2}done/.test(line))).toBeDefined()
    expect(lines.find((line) => /^├─ ✓ spawn \S+ "alpha" {2}done/.test(line))).toBeDefined()
    expect(lines.find((line) => /^└─ ✓ fork \S+ "beta" {2}done/.test(line))).toBeDefined()
    expect(done).toContain('all done: first child done')
  })

  it('the activity column follows what each child is doing, with its tokens, while it works', async () => {
    const dir = tempDir()
    const script = join(dir, 'script.yml')
    // Each child waits in a tool call until the test lets it go: the screen must show that
    // call, then the next one, then the end, without depending on how fast the machine is.
    writeFileSync(script, [
      '- when: { prompt: "first worker" }',
      '  reply:',
      '    - call: { tool: bash, args: { command: "until [ -e gate-a1 ]; do sleep 0.05; done" } }',
      '    - call: { tool: bash, args: { command: "until [ -e gate-a2 ]; do sleep 0.05; done" } }',
      '    - text: "first worker done"',
      '- when: { prompt: "second worker" }',
      '  reply:',
      '    - call: { tool: bash, args: { command: "until [ -e gate-b1 ]; do sleep 0.05; done" } }',
      '    - text: "second worker done"',
      '- when: { depth: 0 }',
      '  reply:',
      '    - calls:',
      '        - { tool: subagent, args: { description: "alpha", prompt: "first worker" } }',
      '        - { tool: subagent_fork, args: { description: "beta", prompt: "second worker" } }',
      '    - text: "all done: {{tool_results}}"',
    ].join('\n'))
    const command = [process.execPath, dshBin, 'run', '--permission', 'allow', '--config', join(repoRoot, 'examples/delegate.yml'), '--model', `scripted:${script}`, '--session-dir', dir, 'go']
      .map((part) => `'${part}'`)
      .join(' ')
    // The children's commands run in the working directory: the gates are files there.
    tmux('new-session', '-d', '-s', session, '-x', '160', '-y', '30', `cd '${dir}' && env DSH_HOME=${dir} ${command}; echo EXIT=$?; sleep 30`)
    // A child's own line (the root's activity may quote the same label in its tool call).
    const line = (text: string, label: string) => text.split('\n').find((each) => new RegExp(`^[├└]─ \\S (spawn|fork) \\S+ "${label}"`).test(each)) ?? ''
    const tokens = /running \d+\.\ds {2}\d+(\.\d)?k? in \d+ out {2}/

    const first = await until((text) => line(text, 'alpha').includes('bash until [ -e gate-a1 ]') && line(text, 'beta').includes('bash until [ -e gate-b1 ]'))
    expect(line(first, 'alpha')).toMatch(tokens)
    expect(line(first, 'beta')).toMatch(tokens)
    writeFileSync(join(dir, 'gate-a1'), '')
    // alpha moved on to its next call; beta is still in its first.
    const second = await until((text) => line(text, 'alpha').includes('bash until [ -e gate-a2 ]'))
    expect(line(second, 'beta')).toContain('bash until [ -e gate-b1 ]')
    writeFileSync(join(dir, 'gate-b1'), '')
    const betaDone = await until((text) => /✓ fork \S+ "beta" {2}done/.test(line(text, 'beta')))
    expect(line(betaDone, 'alpha')).toContain('bash until [ -e gate-a2 ]')
    // A finished child shows its usage and no activity.
    expect(line(betaDone, 'beta')).toMatch(/done \d+\.\ds {2}\d+(\.\d)?k? in \d+ out$/)
    writeFileSync(join(dir, 'gate-a2'), '')
    const done = await until((text) => text.includes('EXIT='))
    expect(done).toContain('EXIT=0')
    expect(done).toContain('all done: first worker done')
  })
})
