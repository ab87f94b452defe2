/**
 * The root's PreToolUse guard across an A2A delegation, both CLIs real processes: `dsh run`
 * (hooks from the project's .claude/settings.json, opted in) delegates through the `a2a`
 * provider to a `dsh a2a serve` worker that has no hooks, trusts its callers with their
 * approvals and whose own rules allow bash. The worker's task and its spawn child ask up
 * for each bash call (the root's askUp level), the root's hook refuses `rm -rf` with its
 * message, and a command it lets through runs.
 */
import { existsSync, mkdirSync, readdirSync, readFileSync, realpathSync, writeFileSync } from 'node:fs'
import { join } from 'node:path'
import { describe, expect, it } from 'vitest'
import { runDsh, tempDir } from './cli.js'
import { serve } from './a2a-serve-process.js'

const GUARD_MESSAGE = 'the team guard blocks rm -rf'

function toolResults(dir: string): string[] {
  return readdirSync(dir)
    .filter((name) => name.endsWith('.jsonl'))
    .flatMap((name) => readFileSync(join(dir, name), 'utf8').split('\n').filter(Boolean).map((line) => JSON.parse(line) as { type?: string; result?: { name: string; content: { text: string }[] } }))
    .flatMap((event) => (event.type === 'tool/result' && event.result ? [`${event.result.name}: ${event.result.content.map((part) => part.text).join('')}`] : []))
}

describe('a root PreToolUse hook over an A2A worker', () => {
  it("blocks rm -rf in the worker's task and in its spawn child, each reading the hook's message, while a command it lets through runs", async () => {
    const project = realpathSync(tempDir())
    const user = realpathSync(tempDir())
    for (const name of ['keep-task', 'keep-grand']) mkdirSync(join(project, name))
    mkdirSync(join(project, '.claude'))
    const guard = `grep -q 'rm -rf' && { echo '${GUARD_MESSAGE}' >&2; exit 2; }; exit 0`
    writeFileSync(join(project, '.claude', 'settings.json'), JSON.stringify({ hooks: { PreToolUse: [{ matcher: 'Bash', hooks: [{ type: 'command', command: guard }] }] } }))
    const workerScript = join(user, 'worker.yml')
    writeFileSync(workerScript, [
      '- when: { prompt: "grand work" }',
      '  reply:',
      `    - call: { tool: bash, args: { command: "rm -rf ${join(project, 'keep-grand')}" } }`,
      '    - text: "grand: {{last_tool_result}}"',
      '- reply:',
      `    - call: { tool: bash, args: { command: "rm -rf ${join(project, 'keep-task')}" } }`,
      `    - call: { tool: bash, args: { command: "touch ${join(project, 'task-ran')}" } }`,
      '    - call: { tool: subagent, args: { description: "grand", prompt: "grand work" } }',
      '    - text: "worker finished"',
    ].join('\n'))
    const workerConfig = join(user, 'worker-config.yml')
    writeFileSync(workerConfig, ['- id: approvals', '  name: "@dsh/approvals"', '  config: { allow: [bash] }', ''].join('\n'))
    const workerSessions = join(user, 'worker-sessions')
    const served = await serve(['--config', workerConfig, '--model', `scripted:${workerScript}`, '--session-dir', workerSessions, '--trust-caller-approvals'])
    const rootScript = join(user, 'root.yml')
    writeFileSync(rootScript, ['- when: { depth: 0 }', '  reply:', '    - call: { tool: subagent_a2a, args: { description: "remote", prompt: "do the remote work" } }', '    - text: "root finished"'].join('\n'))
    const config = join(user, 'config.yml')
    writeFileSync(config, [
      '- name: "@dsh/hooks"',
      '  config: { projectClaudeSettings: true }',
      '- id: approvals',
      '  name: "@dsh/approvals"',
      '  config: { allow: [bash] }',
      '- id: subagent-a2a',
      '  name: "@dsh/subagent-a2a"',
      `  config: { urls: [${served.url}] }`,
      '- id: tool-subagent-a2a',
      '  name: "@dsh/tool-subagent"',
      '  config: { provider: a2a, toolName: subagent_a2a }',
      '',
    ].join('\n'))
    // The project's hook file runs only where the user trusted it.
    expect((await runDsh(['trust'], { cwd: project, env: { DSH_HOME: join(user, 'home') } })).code).toBe(0)
    const result = await runDsh(['run', '--config', config, '--model', `scripted:${rootScript}`, '--session-dir', join(user, 'sessions'), '--permission', 'allow', '--quiet', 'go'], { cwd: project, env: { DSH_HOME: join(user, 'home') }, timeoutMs: 90_000 })
    expect(result.code, result.stderr).toBe(0)
    expect(existsSync(join(project, 'keep-task'))).toBe(true)
    expect(existsSync(join(project, 'keep-grand'))).toBe(true)
    expect(existsSync(join(project, 'task-ran'))).toBe(true)
    const blocked = toolResults(workerSessions).filter((line) => line.startsWith('bash: ') && line.includes(GUARD_MESSAGE))
    expect(blocked).toHaveLength(2)
  })
})
