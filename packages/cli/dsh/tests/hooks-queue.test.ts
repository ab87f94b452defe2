/**
 * A queue cannot ask up the tree, so a call the root's PreToolUse hooks take is refused in
 * a `dsh worker` rather than run unguarded, even where the worker's rules and default and
 * the root's allow it; the refusal says why and what to change, and the root's model reads
 * it. A call no root hook takes runs. Real processes: the built `dsh run` and `dsh worker`,
 * a real redis-server.
 */
import { spawn } from 'node:child_process'
import { existsSync, readdirSync, readFileSync, writeFileSync } from 'node:fs'
import { join } from 'node:path'
import { afterEach, describe, expect, it } from 'vitest'
import { startRedis } from '@dsh/testkit/redis'
import { dshBin, repoRoot, runDsh, tempDir } from './cli.js'
import { until } from './processes.js'

const cleanups: Array<() => Promise<void>> = []
afterEach(async () => {
  for (const cleanup of cleanups.splice(0).reverse()) await cleanup()
})

function file(dir: string, name: string, lines: string[]): string {
  const path = join(dir, name)
  writeFileSync(path, `${lines.join('\n')}\n`)
  return path
}

describe('a root PreToolUse hook over a dsh worker', () => {
  it('a call the root hook takes is refused in the worker, saying it cannot ask up; a call it does not take runs', async () => {
    const server = await startRedis()
    cleanups.push(() => server.stop())
    const dir = tempDir()
    const script = file(dir, 'child.yml', [
      '- reply:',
      `    - call: { tool: bash, args: { command: "touch ${dir}/bash-ran" } }`,
      `    - call: { tool: write, args: { path: ${dir}/written.txt, content: "hello" } }`,
      '    - text: "child: {{tool_results}}"',
    ])
    const sessions = tempDir('dsh-worker-sessions-')
    const workerConfig = file(dir, 'worker.yml', ['- id: approvals', '  name: "@dsh/approvals"', '  config: { default: allow, allow: [bash, write] }'])
    const child = spawn(process.execPath, [dshBin, 'worker', '--model', `scripted:${script}`, '--session-dir', sessions, '--config', workerConfig], {
      cwd: repoRoot,
      env: { ...process.env, DSH_HOME: tempDir('dsh-home-'), DSH_REDIS_URL: server.url },
      stdio: ['ignore', 'pipe', 'pipe'],
    })
    let stderr = ''
    child.stderr!.on('data', (chunk: Buffer) => (stderr += chunk))
    child.stdout!.resume()
    const exited = new Promise<void>((resolve) => child.on('close', () => resolve()))
    cleanups.push(async () => {
      if (child.exitCode === null && child.signalCode === null) child.kill('SIGKILL')
      await exited
    })
    await until(() => /dsh worker \S+: taking jobs/.test(stderr), () => (child.exitCode !== null ? `dsh worker exited ${child.exitCode}: ${stderr}` : undefined))

    const guard = `cat > /dev/null; touch ${dir}/hook-ran; exit 0`
    const config = file(dir, 'root.yml', [
      '- name: "@dsh/hooks"',
      '  config:',
      '    hooks:',
      '      PreToolUse:',
      `        - { matcher: Write, hooks: [{ type: command, command: ${JSON.stringify(guard)} }] }`,
      '- id: approvals',
      '  name: "@dsh/approvals"',
      '  config: { allow: [bash, write] }',
      '- id: subagent-queue',
      '  name: "@dsh/subagent-queue"',
      '- id: tool-subagent-queue',
      '  name: "@dsh/tool-subagent"',
      '  config: { provider: queue, toolName: subagent_queue }',
    ])
    const parent = file(dir, 'root-script.yml', ['- when: { depth: 0 }', '  reply:', '    - call: { tool: subagent_queue, args: { description: "queue child", prompt: "work" } }', '    - text: "root: {{last_tool_result}}"'])
    const result = await runDsh(['run', '--config', config, '--permission', 'allow', '--model', `scripted:${parent}`, '--session-dir', tempDir(), 'go'], { env: { DSH_REDIS_URL: server.url }, timeoutMs: 60_000 })
    expect(result.code, result.stderr).toBe(0)
    expect(existsSync(join(dir, 'written.txt'))).toBe(false)
    // The root's hook never ran: the worker could not ask it.
    expect(existsSync(join(dir, 'hook-ran'))).toBe(false)
    expect(existsSync(join(dir, 'bash-ran'))).toBe(true)
    expect(result.stdout).toMatch(/nobody is there to ask up the tree \(a dsh worker never can/)
    const refusals = readdirSync(sessions, { recursive: true, encoding: 'utf8' })
      .filter((name) => name.endsWith('.jsonl'))
      .flatMap((name) => readFileSync(join(sessions, name), 'utf8').trim().split('\n'))
      .filter((line) => line.includes('"tool/result"') && line.includes('an ancestor in another process decides it itself'))
    expect(refusals).toHaveLength(1)
  })
})
