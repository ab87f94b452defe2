import { writeFileSync } from 'node:fs'
import { join } from 'node:path'
import { describe, expect, it } from 'vitest'
import { runDsh, tempDir } from './cli.js'

describe('dsh demo', () => {
  it('runs keylessly through every provider and ends with a summary of every child', async () => {
    const dir = tempDir()
    const result = await runDsh(['demo', '--session-dir', dir], { timeoutMs: 60_000 })
    expect(result.code).toBe(0)
    const summary = result.stdout.slice(result.stdout.indexOf('Summary:'))
    expect(summary).toMatch(/^Summary: 6 children of \S+/)
    const rows = summary.split('\n').slice(2, 8)
    const providers = rows.map((row) => row.split(/\s+/)[0]).sort()
    expect(providers).toEqual(['acp', 'claude-code', 'codex', 'fork', 'spawn', 'spawn'])
    expect(rows.every((row) => /\bcompleted\b/.test(row))).toBe(true)
    expect(rows.filter((row) => row.includes(dir))).toHaveLength(4)
    // Every in-process child's usage, from its subagent/end, in the tokens column.
    expect(summary.split('\n')[1]).toMatch(/^provider\s+task\s+stop reason\s+done at\s+tokens\s+session$/)
    const local = rows.filter((row) => /^(spawn|fork)\s/.test(row))
    expect(local).toHaveLength(3)
    for (const row of local) expect(row).toMatch(/ {2}in [1-9]\d*( \(cached \d+\))? \/ out [1-9]\d* {2}/)
    expect(result.stdout).toContain('background child: audit finished while the parent kept working.')
    expect(result.stdout).toContain('Codex here: hello, dsh!')
    expect(result.stdout).toContain('Claude Code here: hello, dsh!')
    expect(result.stdout).toContain('ACP child here, in my own process')
  })

  it('runs the same in a directory whose dsh.yml is not trusted: neither it nor its ACP child composes that file', async () => {
    const project = tempDir('dsh-demo-project-')
    writeFileSync(join(project, 'dsh.yml'), '- id: approvals\n  name: "@dsh/approvals"\n  config: { allow: [bash] }\n')
    const result = await runDsh(['demo', '--quiet', '--session-dir', tempDir()], { cwd: project, timeoutMs: 60_000 })
    expect(result.code, result.stderr).toBe(0)
    expect(result.stderr).not.toContain('dsh.yml')
    expect(result.stdout).toContain('ACP child here, in my own process')
  })

  it('dsh sessions tree shows the demo\'s lineage, ACP child included', async () => {
    const dir = tempDir()
    const demo = await runDsh(['demo', '--quiet', '--session-dir', dir], { timeoutMs: 60_000 })
    expect(demo.code).toBe(0)
    const tree = await runDsh(['sessions', 'tree', '--session-dir', dir])
    const lines = tree.stdout.trim().split('\n')
    expect(lines[0]).toMatch(/ {2}cli "Show what dsh can delegate/)
    const children = lines.slice(1).map((line) => /^[├└]─ \S+ {2}(\S+) "([^"]+)" {2}(\S+)/.exec(line)!.slice(1).join(' | '))
    expect(children.sort()).toEqual([
      'acp | ask an ACP agent | completed',
      // Codex and Claude Code keep no dsh session: their lines say where they are instead.
      'claude-code | ask claude | stored',
      'codex | ask codex | stored',
      'fork | review the plan | completed',
      'spawn | background audit | completed',
      'spawn | survey the repo | completed',
    ])
    expect(lines.find((line) => line.includes('codex "ask codex"'))).toMatch(/stored elsewhere: nowhere: an ephemeral Codex thread$/)
    expect(lines.find((line) => line.includes('claude-code "ask claude"'))).toMatch(/stored elsewhere: nowhere: a one-shot Claude Code session is not persisted$/)
  })
})
