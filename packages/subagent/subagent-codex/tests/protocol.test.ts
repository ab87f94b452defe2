import { spawnSync } from 'node:child_process'
import { fileURLToPath } from 'node:url'
import { describe, expect, it } from 'vitest'

const script = fileURLToPath(new URL('../scripts/generate-protocol.mjs', import.meta.url))

describe('src/protocol', () => {
  it('is exactly what `codex app-server generate-ts` of the pinned binary emits for the types the provider uses', () => {
    const result = spawnSync(process.execPath, [script, '--check'], { encoding: 'utf8' })
    expect(result.stderr).toBe('')
    expect(result.status).toBe(0)
  })
})
