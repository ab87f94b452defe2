import { readdirSync, writeFileSync } from 'node:fs'
import { join } from 'node:path'
import { describe, expect, it } from 'vitest'
import { runDsh, tempDir } from './cli.js'

/** The text of one printed prompt block, from its `=== title` line to the next. */
function block(stdout: string, title: string): string {
  const start = stdout.indexOf(`=== ${title}`)
  expect(start).toBeGreaterThanOrEqual(0)
  const next = stdout.indexOf('\n=== ', start + 1)
  return stdout.slice(start, next === -1 ? undefined : next)
}

describe('dsh config check --prompt', () => {
  it('prints the root agent\'s sections, and a child whose tool filter hides the subagent tool has no delegation guidance', async () => {
    const dir = tempDir()
    const file = join(dir, 'dsh.yml')
    writeFileSync(file, '- id: tool-subagent\n  name: "@dsh/tool-subagent"\n  config: { provider: spawn, toolFilter: { deny: [subagent] }, persona: "You are a focused helper." }\n')
    const sessions = join(dir, 'sessions')
    const result = await runDsh(['config', 'check', '--prompt', '--config', file, '--session-dir', sessions])
    expect(result.code).toBe(0)
    const root = block(result.stdout, 'root agent')
    expect(root).toMatch(/sections: persona, environment, subagent:subagent, subagent-control, tasks, bash/)
    expect(root).toContain('You are dsh')
    expect(root).toContain('# Environment')
    expect(root).toContain('# Delegating with `subagent`')
    expect(root).toContain('# Background work')
    const child = block(result.stdout, 'child of tool "subagent"')
    expect(child).toContain('You are a focused helper.')
    expect(child).not.toContain('Delegating with')
    expect(child).toContain('# Background work')
    // A preview stores nothing in the user's session directory.
    expect(readdirSafe(sessions)).toEqual([])
  })
})

function readdirSafe(dir: string): string[] {
  try {
    return readdirSync(dir)
  } catch {
    // No directory at all: nothing was stored, which is what the test checks.
    return []
  }
}
