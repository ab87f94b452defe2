import { spawn } from 'node:child_process'
import { writeFileSync } from 'node:fs'
import { join } from 'node:path'
import { describe, expect, it } from 'vitest'
import { dshBin, runDsh, tempDir } from './cli.js'
import { until } from './processes.js'

/** The number of children of the run `dsh ui` lists for `sessionDir` (its only run). */
async function uiChildren(sessionDir: string): Promise<number> {
  const ui = spawn(process.execPath, [dshBin, 'ui', '--session-dir', sessionDir, '--port', '0'], { env: { ...process.env, DSH_HOME: tempDir('dsh-home-') }, stdio: ['ignore', 'pipe', 'pipe'] })
  try {
    let stdout = ''
    let stderr = ''
    ui.stdout.on('data', (chunk: Buffer) => (stdout += chunk))
    ui.stderr.on('data', (chunk: Buffer) => (stderr += chunk))
    await until(() => stdout.includes('\n'), () => (ui.exitCode !== null ? `dsh ui exited ${ui.exitCode}: ${stderr}` : undefined))
    const url = new URL(stdout.trim())
    const { runs } = (await (await fetch(`${url.origin}/api/runs${url.search}`)).json()) as { runs: Array<{ children: number }> }
    expect(runs).toHaveLength(1)
    return runs[0].children
  } finally {
    ui.kill('SIGTERM')
  }
}

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

  it('counts its children once: the summary, dsh sessions list, dsh sessions tree and dsh ui give the same number', async () => {
    const dir = tempDir()
    const demo = await runDsh(['demo', '--quiet', '--session-dir', dir], { timeoutMs: 60_000 })
    expect(demo.code, demo.stderr).toBe(0)
    const summarized = Number(/^Summary: (\d+) children of /m.exec(demo.stdout)?.[1])
    expect(summarized).toBe(6)
    const list = await runDsh(['sessions', 'list', '--session-dir', dir])
    expect(list.stdout).toMatch(new RegExp(`^\\S+ {2}[\\d-]+ [\\d:]+ +${summarized} children {2}Show what dsh can delegate`))
    const tree = await runDsh(['sessions', 'tree', '--session-dir', dir])
    expect(tree.stdout.trim().split('\n').filter((line) => /^[├└]─ /.test(line))).toHaveLength(summarized)
    expect(await uiChildren(dir)).toBe(summarized)
  })
})
