/**
 * Hooks through the built CLI: a project's .claude/settings.json is a file that runs
 * commands, so dsh reads it only when the user's own config says projectClaudeSettings
 * (else a note on standard error naming it); read, its PreToolUse guard refuses a bash call
 * in the root and in a spawned child, and the model reads the guard's message.
 */
import { existsSync, mkdirSync, readdirSync, readFileSync, writeFileSync } from 'node:fs'
import { join } from 'node:path'
import { describe, expect, it } from 'vitest'
import { runDsh, tempDir } from './cli.js'

/** Every tool result of every session of the run, as `name: text`. */
function toolResults(sessions: string): string[] {
  return readdirSync(sessions)
    .filter((name) => name.endsWith('.jsonl'))
    .flatMap((name) => readFileSync(join(sessions, name), 'utf8').split('\n').filter(Boolean).map((line) => JSON.parse(line) as { type?: string; result?: { name: string; content: { text: string }[] } }))
    .flatMap((event) => (event.type === 'tool/result' && event.result ? [`${event.result.name}: ${event.result.content.map((part) => part.text).join('')}`] : []))
}

/** A project with a guard in .claude/settings.json, a user config outside it, and a script whose root and child each touch a file. */
function fixture(projectClaudeSettings: boolean): { project: string; args: string[] } {
  const project = tempDir()
  const user = tempDir()
  mkdirSync(join(project, '.claude'))
  const guard = `touch ${join(project, 'guard-ran')}; grep -q touch && { echo 'the project guard refuses touch' >&2; exit 2; }; exit 0`
  writeFileSync(join(project, '.claude', 'settings.json'), JSON.stringify({ hooks: { PreToolUse: [{ matcher: 'Bash', hooks: [{ type: 'command', command: guard }] }] } }))
  writeFileSync(join(user, 'config.yml'), ['- name: "@dsh/hooks"', `  config: { projectClaudeSettings: ${projectClaudeSettings} }`, ''].join('\n'))
  const script = [
    '- when: { prompt: "^touch yours" }',
    '  reply:',
    `    - call: { tool: bash, args: { command: "touch ${join(project, 'child-ran')}" } }`,
    '    - text: "child: {{last_tool_result}}"',
    '- when: { depth: 0 }',
    '  reply:',
    '    - call: { tool: subagent, args: { description: helper, prompt: "touch yours" } }',
    `    - call: { tool: bash, args: { command: "touch ${join(project, 'root-ran')}" } }`,
    '    - text: "root: {{last_tool_result}}"',
  ]
  writeFileSync(join(user, 'script.yml'), `${script.join('\n')}\n`)
  return { project, args: ['run', '--config', join(user, 'config.yml'), '--model', `scripted:${join(user, 'script.yml')}`, '--session-dir', join(user, 'sessions'), '--permission', 'allow', '--quiet', 'go'] }
}

describe('hooks through dsh run', () => {
  it('a project\'s .claude/settings.json is not read unless the user\'s config says so: its guard never runs, and a note names the file', async () => {
    const { project, args } = fixture(false)
    const result = await runDsh(args, { cwd: project, env: { DSH_HOME: join(project, '.home') }, timeoutMs: 60_000 })
    expect(result.code, result.stderr).toBe(0)
    expect(result.stderr).toContain(`${join(project, '.claude', 'settings.json')} has hooks, which are not run`)
    expect(existsSync(join(project, 'guard-ran'))).toBe(false)
    expect(existsSync(join(project, 'root-ran'))).toBe(true)
    expect(existsSync(join(project, 'child-ran'))).toBe(true)
  })

  it('with projectClaudeSettings: true, in a directory trusted with dsh trust, its PreToolUse guard refuses bash in the root and in a spawned child, and the model reads why', async () => {
    const { project, args } = fixture(true)
    const dir = args[args.indexOf('--session-dir') + 1]!
    // The project's hook file runs only where the user trusted it (hooks-trust.test.ts).
    expect((await runDsh(['trust'], { cwd: project, env: { DSH_HOME: join(project, '.home') } })).code).toBe(0)
    const result = await runDsh(args, { cwd: project, env: { DSH_HOME: join(project, '.home') }, timeoutMs: 60_000 })
    expect(result.code, result.stderr).toBe(0)
    expect(existsSync(join(project, 'root-ran'))).toBe(false)
    expect(existsSync(join(project, 'child-ran'))).toBe(false)
    const refused = toolResults(dir).filter((line) => line.startsWith('bash: ') && line.includes('the project guard refuses touch'))
    expect(refused).toHaveLength(2)
    expect(result.stdout).toContain('root: bash was not run: permission denied by PreToolUse hook')
  })
})
