import { readFileSync, writeFileSync } from 'node:fs'
import { join } from 'node:path'
import { describe, expect, it } from 'vitest'
import { repoRoot, runDsh, tempDir } from './cli.js'

const script = join(repoRoot, 'examples/delegate-script.yml')
const delegateConfig = readFileSync(join(repoRoot, 'examples/delegate.yml'), 'utf8')

/** examples/delegate.yml plus a price table: 1 per input token, 0.5 per cache hit, 2 per output token. */
function pricedConfig(dir: string, prices = `{ "scripted:${script}": { input: 1000000, cacheHitInput: 500000, output: 2000000 } }`): string {
  const file = join(dir, 'dsh.yml')
  writeFileSync(file, `${delegateConfig}\n- id: llm\n  name: "@dsh/llm"\n  config:\n    prices: ${prices}\n`)
  return file
}

const USAGE = /in (\d+) \/ out (\d+) tokens, cost (\d+\.\d{4})/

function parsed(line: string): { input: number; output: number; cost: number } {
  const match = USAGE.exec(line)
  expect(match, line).not.toBeNull()
  return { input: Number(match![1]), output: Number(match![2]), cost: Number(match![3]) }
}

describe('usage and cost in dsh sessions', () => {
  it('tree --usage shows each session\'s usage and cost and the whole tree\'s, which is their sum; show gives the session\'s and its tree\'s', async () => {
    const dir = tempDir()
    const config = pricedConfig(dir)
    const sessions = join(dir, 'sessions')
    const run = await runDsh(['run', '--quiet', '--config', config, '--model', `scripted:${script}`, '--session-dir', sessions, 'review the plan'])
    expect(run.code).toBe(0)
    const result = await runDsh(['sessions', 'tree', '--usage', '--config', config, '--session-dir', sessions])
    expect(result.code).toBe(0)
    const lines = result.stdout.trim().split('\n')
    expect(lines).toHaveLength(4)
    const perSession = lines.slice(0, 3).map(parsed)
    for (const usage of perSession) {
      expect(usage.input).toBeGreaterThan(0)
      expect(usage.cost).toBeCloseTo(usage.input + 2 * usage.output, 4)
    }
    expect(lines[3]).toMatch(/^usage of the tree \(3 sessions\): /)
    const total = parsed(lines[3]!)
    expect(total.input).toBe(perSession.reduce((sum, usage) => sum + usage.input, 0))
    expect(total.output).toBe(perSession.reduce((sum, usage) => sum + usage.output, 0))

    const rootId = lines[0]!.split(' ')[0]!
    const show = await runDsh(['sessions', 'show', rootId, '--config', config, '--session-dir', sessions])
    expect(show.code).toBe(0)
    const own = show.stdout.split('\n').find((line) => line.startsWith('usage: '))!
    expect(parsed(own)).toEqual(perSession[0])
    const whole = show.stdout.split('\n').find((line) => line.startsWith('usage of its delegation tree (3 sessions): '))!
    expect(parsed(whole)).toEqual(total)
    // Then each child's own, as the tree line of that child gives it.
    const showLines = show.stdout.trimEnd().split('\n')
    const perChild = showLines.slice(showLines.indexOf(whole) + 1)
    expect(perChild).toHaveLength(2)
    for (const line of perChild) {
      const [id, provider] = line.trim().split(/\s+/)
      expect(['spawn', 'fork']).toContain(provider)
      const treeLine = lines.find((each) => each.includes(`${id}  ${provider}`))!
      expect(parsed(line)).toEqual(parsed(treeLine))
    }
  })

  it('without a price table, usage is shown in tokens only, and the plain tree has none', async () => {
    const dir = tempDir()
    const sessions = join(dir, 'sessions')
    expect((await runDsh(['run', '--quiet', '--model', 'scripted:examples/hello.yml', '--session-dir', sessions, 'hello'])).code).toBe(0)
    const plain = await runDsh(['sessions', 'tree', '--session-dir', sessions])
    // The plain tree is unchanged: usage is asked for with --usage.
    expect(plain.stdout).not.toContain('tokens')
    const result = await runDsh(['sessions', 'tree', '--usage', '--session-dir', sessions])
    expect(result.stdout).toMatch(/\[in \d+ \/ out \d+ tokens\]\n/)
    expect(result.stdout).not.toContain('cost')
  })

  it('a negative price fails at load, naming the entry', async () => {
    const dir = tempDir()
    const result = await runDsh(['config', 'check', '--config', pricedConfig(dir, '{ "deepseek:deepseek-chat": { input: -1, output: 2 } }')])
    expect(result.code).toBe(2)
    expect(result.stderr).toContain('prices["deepseek:deepseek-chat"].input must be a number of zero or more')
  })

  it('a price for a model of an adapter that is not loaded fails at load, naming the entry', async () => {
    const dir = tempDir()
    const result = await runDsh(['config', 'check', '--config', pricedConfig(dir, '{ "nosuch:model-x": { input: 1, output: 2 } }')])
    expect(result.code).toBe(2)
    expect(result.stderr).toContain('prices["nosuch:model-x"] names adapter "nosuch", which is not loaded')
  })
})
