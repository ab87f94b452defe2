import { readFileSync, readdirSync } from 'node:fs'
import { join } from 'node:path'
import { describe, expect, it } from 'vitest'
import { repoRoot, runDsh, tempDir } from './cli.js'

const config = join(repoRoot, 'examples/delegate.yml')
const script = join(repoRoot, 'examples/delegate-script.yml')

interface Header {
  id: string
  parentSession?: string
  origin?: string
  delegationDepth?: number
  provider?: string
  seedLength?: number
}

function headers(dir: string): Header[] {
  return readdirSync(dir)
    .filter((name) => name.endsWith('.jsonl'))
    .map((name) => (JSON.parse(readFileSync(join(dir, name), 'utf8').split('\n')[0]) as { header: Header }).header)
}

describe('dsh run with delegation', () => {
  it('a scripted parent delegating to a spawn child and a fork child in one step prints an answer built from both', async () => {
    const dir = tempDir()
    const result = await runDsh(['run', '--config', config, '--model', `scripted:${script}`, '--session-dir', dir, 'review the plan'])
    expect(result.code).toBe(0)
    expect(result.stdout).toContain('risks: the migration has no rollback')
    expect(result.stdout).toContain('fix: add a down-migration first')
  })

  it('when stdout is not a terminal, prints one plain progress line per lifecycle change, in lifecycle order', async () => {
    const dir = tempDir()
    const result = await runDsh(['run', '--config', config, '--model', `scripted:${script}`, '--session-dir', dir, 'review the plan'])
    expect(result.code).toBe(0)
    const lines = result.stderr.trim().split('\n')
    expect(lines).toHaveLength(4)
    const parsed = lines.map((line) => /^\[subagent\] (start|end) (\w+) (\S+)/.exec(line)!)
    expect(parsed.every(Boolean)).toBe(true)
    for (const [, kind, provider, id] of parsed.filter(([, kind]) => kind === 'start')) {
      const endIndex = parsed.findIndex(([, k, , i]) => k === 'end' && i === id)
      expect(endIndex).toBeGreaterThan(parsed.findIndex(([, k, , i]) => k === kind && i === id))
      expect(lines[endIndex]).toContain(`${provider} ${id} completed after`)
    }
    expect(lines.filter((line) => line.includes('start'))[0]).toMatch(/"find risks" \(parent \S+\)$/)
  })

  it('--quiet prints the answer without progress lines', async () => {
    const dir = tempDir()
    const result = await runDsh(['run', '--quiet', '--config', config, '--model', `scripted:${script}`, '--session-dir', dir, 'review the plan'])
    expect(result.code).toBe(0)
    expect(result.stderr).toBe('')
    expect(result.stdout).toContain('fix: add a down-migration first')
  })

  it('persists child sessions beside the parent\'s, with lineage in their headers', async () => {
    const dir = tempDir()
    const result = await runDsh(['run', '--config', config, '--model', `scripted:${script}`, '--session-dir', dir, 'review the plan'])
    expect(result.code).toBe(0)
    const all = headers(dir)
    expect(all).toHaveLength(3)
    const root = all.find((header) => header.origin === 'cli')!
    const children = all.filter((header) => header.parentSession === root.id)
    expect(children.map((header) => header.provider).sort()).toEqual(['fork', 'spawn'])
    expect(children.every((header) => header.origin === 'subagent' && header.delegationDepth === 1)).toBe(true)
  })

  it('--json includes subagent/start and subagent/end records, each start before its end', async () => {
    const dir = tempDir()
    const result = await runDsh(['run', '--json', '--config', config, '--model', `scripted:${script}`, '--session-dir', dir, 'review the plan'])
    expect(result.code).toBe(0)
    const records = result.stdout.trim().split('\n').map((line) => JSON.parse(line) as { kind: string; runId?: string; provider?: string; stopReason?: string })
    const lifecycle = records.filter((record) => record.kind === 'subagent/start' || record.kind === 'subagent/end')
    expect(lifecycle).toHaveLength(4)
    for (const start of lifecycle.filter((record) => record.kind === 'subagent/start')) {
      const end = lifecycle.findIndex((record) => record.kind === 'subagent/end' && record.runId === start.runId)
      expect(end).toBeGreaterThan(lifecycle.indexOf(start))
      expect(lifecycle[end].stopReason).toBe('completed')
    }
    expect(lifecycle.filter((record) => record.kind === 'subagent/start').map((record) => record.provider).sort()).toEqual(['fork', 'spawn'])
  })
})
