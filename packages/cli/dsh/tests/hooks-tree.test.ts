/**
 * One guard for the whole tree, through the built CLI on a scripted model: the project's
 * PreToolUse hook (from .claude/settings.json, or from Codex's .codex/hooks.json), read at
 * the root only, blocks `rm -rf` in the root, in a spawn child, and in a spawn grandchild of
 * a `dsh acp` child, which runs in its own process without any hooks and whose rules (its
 * own and those it received) allow bash: the root's matchers travel down as an askUp level,
 * the child asks up for the call, and the root's hook decides it. Every model reads the
 * hook's message; a command the guard lets through still runs in the grandchild. A read
 * there, which has no side effects, is asked up for the root's Read guard as well.
 */
import { existsSync, mkdirSync, readdirSync, readFileSync, realpathSync, writeFileSync } from 'node:fs'
import { join } from 'node:path'
import { describe, expect, it } from 'vitest'
import { dshBin, runDsh, tempDir } from './cli.js'

const GUARD_MESSAGE = 'the team guard blocks rm -rf'
const READ_MESSAGE = 'the team guard keeps secrets unread'

/** Every tool result of every session file in `dir`, as `name: text`. */
function toolResults(dir: string): string[] {
  if (!existsSync(dir)) return []
  return readdirSync(dir)
    .filter((name) => name.endsWith('.jsonl'))
    .flatMap((name) => readFileSync(join(dir, name), 'utf8').split('\n').filter(Boolean).map((line) => JSON.parse(line) as { type?: string; result?: { name: string; content: { text: string }[] } }))
    .flatMap((event) => (event.type === 'tool/result' && event.result ? [`${event.result.name}: ${event.result.content.map((part) => part.text).join('')}`] : []))
}

type HookFile = 'claude' | 'codex'

/** A project holding the guard in `file`'s format, a user config outside it that opts in, and a script for the whole tree. */
function fixture(file: HookFile, childGuard?: string) {
  const project = realpathSync(tempDir())
  const user = realpathSync(tempDir())
  for (const name of ['keep-root', 'keep-spawn', 'keep-grand']) mkdirSync(join(project, name))
  const guard = `grep -q 'rm -rf' && { echo '${GUARD_MESSAGE}' >&2; exit 2; }; exit 0`
  const readGuard = `grep -q secret && { echo '${READ_MESSAGE}' >&2; exit 2; }; exit 0`
  writeFileSync(join(project, 'secret.txt'), 'the secret\n')
  const hooks = { hooks: { PreToolUse: [{ matcher: 'Bash', hooks: [{ type: 'command', command: guard }] }, { matcher: 'Read', hooks: [{ type: 'command', command: readGuard }] }] } }
  const where = file === 'claude' ? join(project, '.claude', 'settings.json') : join(project, '.codex', 'hooks.json')
  mkdirSync(join(where, '..'))
  writeFileSync(where, JSON.stringify(hooks))
  const script = join(user, 'script.yml')
  writeFileSync(script, [
    '- when: { prompt: "^spawn work" }',
    '  reply:',
    `    - call: { tool: bash, args: { command: "rm -rf ${join(project, 'keep-spawn')}" } }`,
    '    - text: "spawn: {{last_tool_result}}"',
    '- when: { prompt: "^acp work" }',
    '  reply:',
    '    - call: { tool: subagent, args: { description: grand, prompt: "grand work" } }',
    '    - text: "acp: {{last_tool_result}}"',
    '- when: { prompt: "^grand work" }',
    '  reply:',
    `    - call: { tool: bash, args: { command: "rm -rf ${join(project, 'keep-grand')}" } }`,
    `    - call: { tool: bash, args: { command: "touch ${join(project, 'grand-ran')}" } }`,
    `    - call: { tool: read, args: { path: ${join(project, 'secret.txt')} } }`,
    '    - text: "grand: {{tool_results}}"',
    '- when: { depth: 0 }',
    '  reply:',
    `    - call: { tool: bash, args: { command: "rm -rf ${join(project, 'keep-root')}" } }`,
    '    - call: { tool: subagent, args: { description: spawned, prompt: "spawn work" } }',
    '    - call: { tool: subagent_acp, args: { description: remote, prompt: "acp work" } }',
    '    - text: "root: {{tool_results}}"',
  ].join('\n'))
  // The ACP child's own config: no hooks at all, and its rules allow bash.
  const childConfig = join(user, 'child.yml')
  const childHooks = childGuard === undefined ? [] : ['- name: "@dsh/hooks"', '  config:', '    hooks:', '      PreToolUse:', `        - { matcher: Bash, hooks: [{ type: command, command: ${JSON.stringify(childGuard)} }] }`]
  writeFileSync(childConfig, ['- id: approvals', '  name: "@dsh/approvals"', '  config: { allow: [bash] }', ...childHooks, ''].join('\n'))
  const childSessions = join(user, 'child-sessions')
  const childArgs = [dshBin, 'acp', '--config', childConfig, '--model', `scripted:${script}`, '--session-dir', childSessions, '--permission', 'allow']
  const config = join(user, 'config.yml')
  writeFileSync(config, [
    '- name: "@dsh/hooks"',
    `  config: { ${file === 'claude' ? 'projectClaudeSettings' : 'projectCodexHooks'}: true }`,
    // The root's rules allow bash too: what the child received allows it, so only the askUp level sends it up.
    '- id: approvals',
    '  name: "@dsh/approvals"',
    '  config: { allow: [bash] }',
    '- id: subagent-acp',
    '  name: "@dsh/subagent-acp"',
    '  config:',
    '    providerName: acp',
    `    command: ${JSON.stringify(process.execPath)}`,
    `    args: [${childArgs.map((arg) => JSON.stringify(arg)).join(', ')}]`,
    '- id: tool-subagent-acp',
    '  name: "@dsh/tool-subagent"',
    '  config: { provider: acp, toolName: subagent_acp }',
    '',
  ].join('\n'))
  const sessions = join(user, 'sessions')
  const args = ['run', '--config', config, '--model', `scripted:${script}`, '--session-dir', sessions, '--permission', 'allow', '--quiet', 'go']
  return { project, user, args, sessions, childSessions }
}

describe('a root PreToolUse hook guards the whole tree', () => {
  for (const file of ['claude', 'codex'] as const) {
    it(`from ${file === 'claude' ? ".claude/settings.json" : 'a Codex .codex/hooks.json'}: rm -rf is blocked in the root, a spawn child and a spawn grandchild of a dsh acp child (and a Read guard blocks its read), and each model reads the hook's message`, async () => {
      const t = fixture(file)
      // The project's hook file runs only where the user trusted it.
      expect((await runDsh(['trust'], { cwd: t.project, env: { DSH_HOME: join(t.user, 'home') } })).code).toBe(0)
      const result = await runDsh(t.args, { cwd: t.project, env: { DSH_HOME: join(t.user, 'home') }, timeoutMs: 90_000 })
      expect(result.code, result.stderr).toBe(0)
      for (const name of ['keep-root', 'keep-spawn', 'keep-grand']) expect(existsSync(join(t.project, name)), name).toBe(true)
      // What the guard lets through still runs below the ACP child: asked up, allowed by the root.
      expect(existsSync(join(t.project, 'grand-ran'))).toBe(true)
      const blocked = (results: string[]) => results.filter((line) => line.startsWith('bash: ') && line.includes(GUARD_MESSAGE))
      expect(blocked(toolResults(t.sessions))).toHaveLength(2)
      const grand = blocked(toolResults(t.childSessions))
      expect(grand).toHaveLength(1)
      expect(grand[0]).toContain('PreToolUse hook')
      // A read, which has no side effects, is asked up for the root's Read guard too.
      const reads = toolResults(t.childSessions).filter((line) => line.startsWith('read: '))
      expect(reads).toEqual([expect.stringContaining(READ_MESSAGE)])
      expect(reads[0]).not.toContain('the secret')
    })
  }

  it("where the dsh acp child has hooks of its own, both run and the stricter wins: its guard blocks what the root's lets through, and the root's still blocks rm -rf below it", async () => {
    const childMessage = 'the child guard blocks touch'
    const t = fixture('claude', `grep -q touch && { echo '${childMessage}' >&2; exit 2; }; exit 0`)
    expect((await runDsh(['trust'], { cwd: t.project, env: { DSH_HOME: join(t.user, 'home') } })).code).toBe(0)
    const result = await runDsh(t.args, { cwd: t.project, env: { DSH_HOME: join(t.user, 'home') }, timeoutMs: 90_000 })
    expect(result.code, result.stderr).toBe(0)
    expect(existsSync(join(t.project, 'keep-grand'))).toBe(true)
    expect(existsSync(join(t.project, 'grand-ran'))).toBe(false)
    const grand = toolResults(t.childSessions).filter((line) => line.startsWith('bash: '))
    expect(grand).toEqual([expect.stringContaining(GUARD_MESSAGE), expect.stringContaining(childMessage)])
  })
})
