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
    expect(result.stderr).toBe('')
    expect(result.code).toBe(0)
    expect(result.stdout).toContain('risks: the migration has no rollback')
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
    const lifecycle = records.filter((record) => record.kind.startsWith('subagent/'))
    expect(lifecycle).toHaveLength(4)
    for (const start of lifecycle.filter((record) => record.kind === 'subagent/start')) {
      const end = lifecycle.findIndex((record) => record.kind === 'subagent/end' && record.runId === start.runId)
      expect(end).toBeGreaterThan(lifecycle.indexOf(start))
      expect(lifecycle[end].stopReason).toBe('completed')
    }
    expect(lifecycle.filter((record) => record.kind === 'subagent/start').map((record) => record.provider).sort()).toEqual(['fork', 'spawn'])
  })
})
