import { execFileSync, spawn } from 'node:child_process'
import { writeFileSync } from 'node:fs'
import { join } from 'node:path'
import { describe, expect, it } from 'vitest'
import { dshBin, repoRoot, runDsh, tempDir } from './cli.js'
import { until } from './processes.js'

function pidsMatching(pattern: string): number[] {
  try {
    return execFileSync('pgrep', ['-f', pattern], { encoding: 'utf8' }).trim().split('\n').filter(Boolean).map(Number)
  } catch {
    return []
  }
}

describe('dsh run with background work', () => {
  it('collects a background child and a background command with task_output before exiting', async () => {
    const dir = tempDir()
    const result = await runDsh(['run', '--permission', 'allow', '--model', `scripted:${join(repoRoot, 'examples/background-script.yml')}`, '--session-dir', dir, 'audit the repo'])
    expect(result.code).toBe(0)
    // The answer is the last message; text of the steps before it is not printed.
    expect(result.stdout).toMatch(/^Collected: .*background command finished/)
    expect(result.stdout).not.toContain('Both are running')
    expect(result.stderr).toMatch(/\[subagent\] end spawn \S+ completed/)
  })

  it('waits for a background task that settles after the turn, and handles its completion notice', async () => {
    const dir = tempDir()
    const script = join(dir, 'script.yml')
    writeFileSync(script, [
      '- when: { depth: 0 }',
      '  reply:',
      '    - call: { tool: bash, args: { command: "sleep 0.3; echo late result", run_in_background: true } }',
      '    - text: "started it"',
      '    - text: "the notice said: {{last_tool_result}}"',
    ].join('\n'))
    const result = await runDsh(['run', '--json', '--permission', 'allow', '--model', `scripted:${script}`, '--session-dir', dir, 'go'])
    expect(result.code).toBe(0)
    const events = result.stdout.trim().split('\n').map((line) => JSON.parse(line) as { kind: string; event?: { type: string; message?: { content: { text?: string }[] } } })
    const turns = events.filter((record) => record.event?.type === 'turn/start')
    expect(turns).toHaveLength(2)
    const notice = events.find((record) => record.event?.type === 'user/message' && JSON.stringify(record.event.message).includes('bash-1'))
    expect(notice).toBeDefined()
  })

  it('Ctrl-C cancels the turn and every background task, and exits once they are gone', async () => {
    const dir = tempDir()
    const marker = `${40 + (process.pid % 1000) / 1000}`
    const script = join(dir, 'script.yml')
    writeFileSync(script, [
      '- when: { prompt: "take forever" }',
      '  reply: [{ text: "never", delay_ms: 60000 }]',
      '- when: { depth: 0 }',
      '  reply:',
      `    - call: { tool: bash, args: { command: "sleep ${marker}", run_in_background: true } }`,
      '    - call: { tool: subagent, args: { description: "slow", prompt: "take forever" } }',
      '    - text: "never"',
    ].join('\n'))
    const child = spawn(process.execPath, [dshBin, 'run', '--permission', 'allow', '--model', `scripted:${script}`, '--session-dir', dir, 'go'], {
      cwd: repoRoot,
      env: { ...process.env, DSH_HOME: dir },
      stdio: ['ignore', 'pipe', 'pipe'],
    })
    let stderr = ''
    child.stderr.on('data', (chunk: Buffer) => (stderr += chunk))
    const exited = new Promise<number | null>((resolve) => child.on('close', (code) => resolve(code)))
    await until(
      () => stderr.includes('[subagent] start') && pidsMatching(`sleep ${marker}`).length > 0,
      () => (child.exitCode !== null ? `the run never got going (dsh exited ${child.exitCode}):\n${stderr}` : undefined),
    )
    child.kill('SIGINT')
    const code = await exited
    expect(code).toBe(130)
    expect(stderr).toContain('cancelling')
    expect(stderr).toMatch(/\[subagent\] end spawn \S+ aborted/)
    expect(stderr).toContain('dsh: cancelled')
    expect(pidsMatching(`sleep ${marker}`)).toEqual([])
  })
})

describe('dsh run after notice turns', () => {
  it('a notice turn that fails is the run\'s outcome', async () => {
    const dir = tempDir()
    const script = join(dir, 'script.yml')
    writeFileSync(script, [
      '- when: { depth: 0 }',
      '  reply:',
      '    - call: { tool: bash, args: { command: "sleep 0.3; echo late", run_in_background: true } }',
      '    - text: "started it"',
      '    - error: "the model fell over in the notice turn"',
    ].join('\n'))
    const result = await runDsh(['run', '--permission', 'allow', '--model', `scripted:${script}`, '--session-dir', dir, 'go'])
    expect(result.code).toBe(1)
    expect(result.stderr).toContain('the turn ended error: the model fell over in the notice turn')
  })
})

describe('dsh run interrupted twice', () => {
  it('a second Ctrl-C exits at once and still takes every process group it started down with it', async () => {
    const dir = tempDir()
    const marker = `${47 + (process.pid % 1000) / 1000}`
    const script = join(dir, 'script.yml')
    writeFileSync(script, [
      '- when: { depth: 0 }',
      '  reply:',
      // ignores SIGTERM, so the first Ctrl-C's graceful stop is still waiting when the second arrives
      `    - call: { tool: bash, args: { command: "trap '' TERM; sleep ${marker}", run_in_background: true } }`,
      '    - { text: "waiting", delay_ms: 60000 }',
    ].join('\n'))
    const child = spawn(process.execPath, [dshBin, 'run', '--permission', 'allow', '--model', `scripted:${script}`, '--session-dir', dir, 'go'], {
      cwd: repoRoot,
      env: { ...process.env, DSH_HOME: dir },
      stdio: ['ignore', 'pipe', 'pipe'],
    })
    let stderr = ''
    child.stderr.on('data', (chunk: Buffer) => (stderr += chunk))
    const exited = new Promise<number | null>((resolve) => child.on('close', (code) => resolve(code)))
    await until(
      () => pidsMatching(`sleep ${marker}`).length > 0,
      () => (child.exitCode !== null ? `the background command never started (dsh exited ${child.exitCode}):\n${stderr}` : undefined),
    )
    child.kill('SIGINT')
    // The second Ctrl-C once the first is being handled (its graceful stop waits on the command that ignores TERM).
    await until(() => stderr.includes('cancelling'), () => (child.exitCode !== null ? `dsh exited ${child.exitCode} on the first Ctrl-C:\n${stderr}` : undefined))
    child.kill('SIGINT')
    expect(await exited).toBe(130)
    // SIGKILL lands a moment after dsh exits; a command left behind would outlive the test's timeout (it sleeps 47 s).
    await until(() => pidsMatching(`sleep ${marker}`).length === 0)
  })
})
