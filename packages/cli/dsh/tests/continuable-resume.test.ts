import { readFileSync, readdirSync, writeFileSync } from 'node:fs'
import { join } from 'node:path'
import { describe, expect, it } from 'vitest'
import { runDsh, tempDir } from './cli.js'

/** A stored session file: its header and one completed turn per prompt. */
function storeSession(dir: string, header: Record<string, unknown>, prompts: string[]): string {
  const lines = [JSON.stringify({ kind: 'header', version: 1, header: { createdAt: '2026-01-01T00:00:00.000Z', cwd: dir, ...header } })]
  let seq = 0
  for (const [index, prompt] of prompts.entries()) {
    const turn = index + 1
    lines.push(JSON.stringify({ seq: seq++, ts: 1, type: 'turn/start', turn }))
    lines.push(JSON.stringify({ seq: seq++, ts: 1, type: 'user/message', message: { role: 'user', content: [{ type: 'text', text: prompt }] } }))
    lines.push(JSON.stringify({ seq: seq++, ts: 1, type: 'turn/end', turn, reason: 'completed' }))
  }
  const file = join(dir, `${String(header.id)}.jsonl`)
  writeFileSync(file, `${lines.join('\n')}\n`)
  return file
}

describe('dsh run --resume of a continuable child', () => {
  it('is refused with one usage line (exit 2) pointing at the parent, for in-process children and remote records alike; no file changes', async () => {
    const dir = tempDir()
    const script = join(dir, 'script.yml')
    writeFileSync(script, '- reply:\n    - text: "a local turn"\n')
    storeSession(dir, { id: 'root-1', origin: 'cli' }, ['go'])
    const children = {
      'spawned-1': { version: 1, mode: 'continuable', provider: 'spawn', label: 'helper' },
      'record-1': { version: 1, mode: 'continuable', provider: 'acp', label: 'remote helper', remote: { remoteId: 'remote-7' } },
    }
    for (const [id, descriptor] of Object.entries(children)) {
      storeSession(dir, { id, parentSession: 'root-1', origin: 'subagent', delegationDepth: 1, provider: descriptor.provider, label: descriptor.label, descriptor }, ['first'])
    }
    const before = Object.fromEntries(readdirSync(dir).map((name) => [name, readFileSync(join(dir, name), 'utf8')]))

    for (const id of Object.keys(children)) {
      const result = await runDsh(['run', '--model', `scripted:${script}`, '--session-dir', dir, '--resume', id, 'hello'])
      expect(result.code).toBe(2)
      expect(result.stdout).toBe('')
      expect(result.stderr.trim().split('\n')).toEqual([expect.stringMatching(new RegExp(`^dsh run: session ${id} is a continuable subagent of root-1; message it through its parent instead`))])
    }
    expect(Object.fromEntries(readdirSync(dir).map((name) => [name, readFileSync(join(dir, name), 'utf8')]))).toEqual(before)

    // The parent itself still resumes.
    const parent = await runDsh(['run', '--model', `scripted:${script}`, '--session-dir', dir, '--resume', 'root-1', 'hello'])
    expect(parent.code).toBe(0)
    expect(parent.stdout).toContain('a local turn')
  })
})
