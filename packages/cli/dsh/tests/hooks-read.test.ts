/**
 * PreToolUse for tools without side effects, through the built CLI with the real file
 * tools: a hook whose matcher names Read decides each read (a guard refuses a secret file,
 * and the model reads why), a read it lets through runs, even under --permission reject
 * (no rule or default decides a read); a hook matching only Bash never runs for a read.
 * Each run of the guard is a hook/run event of the session, which dsh sessions show lists.
 */
import { existsSync, readdirSync, readFileSync, realpathSync, writeFileSync } from 'node:fs'
import { join } from 'node:path'
import { describe, expect, it } from 'vitest'
import { runDsh, tempDir } from './cli.js'

function toolResults(dir: string): string[] {
  return readdirSync(dir)
    .filter((name) => name.endsWith('.jsonl'))
    .flatMap((name) => readFileSync(join(dir, name), 'utf8').split('\n').filter(Boolean).map((line) => JSON.parse(line) as { type?: string; result?: { name: string; content: { text: string }[] } }))
    .flatMap((event) => (event.type === 'tool/result' && event.result ? [`${event.result.name}: ${event.result.content.map((part) => part.text).join('')}`] : []))
}

describe('PreToolUse hooks on read', () => {
  it('a Read matcher guards reads (a secret refused with its message, another read run under --permission reject); a Bash hook never runs for them', async () => {
    const project = realpathSync(tempDir())
    const user = realpathSync(tempDir())
    writeFileSync(join(project, 'secret.txt'), 'the secret\n')
    writeFileSync(join(project, 'notes.txt'), 'plain notes\n')
    const readGuard = `grep -q secret && { echo 'secrets are not read here' >&2; exit 2; }; exit 0`
    const bashMark = `cat > /dev/null; touch ${join(user, 'bash-hook-ran')}`
    writeFileSync(join(user, 'config.yml'), [
      '- name: "@dsh/hooks"',
      '  config:',
      '    hooks:',
      '      PreToolUse:',
      `        - { matcher: Read, hooks: [{ type: command, command: ${JSON.stringify(readGuard)} }] }`,
      `        - { matcher: Bash, hooks: [{ type: command, command: ${JSON.stringify(bashMark)} }] }`,
      '',
    ].join('\n'))
    writeFileSync(join(user, 'script.yml'), [
      '- when: { depth: 0 }',
      '  reply:',
      '    - call: { tool: read, args: { path: secret.txt } }',
      '    - call: { tool: read, args: { path: notes.txt } }',
      '    - text: "done: {{last_tool_result}}"',
      '',
    ].join('\n'))
    const sessions = join(user, 'sessions')
    const result = await runDsh(['run', '--config', join(user, 'config.yml'), '--model', `scripted:${join(user, 'script.yml')}`, '--session-dir', sessions, '--permission', 'reject', '--quiet', 'go'], { cwd: project, env: { DSH_HOME: join(user, 'home') }, timeoutMs: 60_000 })
    expect(result.code, result.stderr).toBe(0)
    const reads = toolResults(sessions).filter((line) => line.startsWith('read: '))
    expect(reads).toHaveLength(2)
    expect(reads[0]).toContain('secrets are not read here')
    expect(reads[0]).not.toContain('the secret')
    expect(reads[1]).toContain('plain notes')
    expect(existsSync(join(user, 'bash-hook-ran'))).toBe(false)
    // Each run of the Read guard is in the session, and dsh sessions show lists it.
    const [file] = readdirSync(sessions).filter((name) => name.endsWith('.jsonl'))
    const shown = await runDsh(['sessions', 'show', file!.replace(/\.jsonl$/, ''), '--session-dir', sessions], { env: { DSH_HOME: join(user, 'home') } })
    expect(shown.code, shown.stderr).toBe(0)
    const runs = shown.stdout.split('\n').filter((line) => line.includes('⚑ PreToolUse hook'))
    expect(runs).toEqual([expect.stringMatching(/: exit 2, \d+ ms, block$/), expect.stringMatching(/: exit 0, \d+ ms$/)])
  })
})
