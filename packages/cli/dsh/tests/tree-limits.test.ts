/**
 * A delegation tree's cap and budget through the CLI, keyless: the scripted model plays a
 * parent that fans out in one step, and the children's own session files tell when each ran.
 */
import { readdirSync, readFileSync, writeFileSync } from 'node:fs'
import { join } from 'node:path'
import { describe, expect, it } from 'vitest'
import { dshBin, runDsh, tempDir } from './cli.js'

interface Child {
  id: string
  startedAt: number
  endedAt: number
  reason: string
  outputTokens: number
}

type Line = { kind?: string; header?: { id: string; parentSession?: string; delegationDepth?: number; budget?: Record<string, number> }; type?: string; ts?: number; reason?: string; error?: string; usage?: { outputTokens: number } }

/** Every child session in `dir`: its turn's start and end times, how it ended and its output tokens. */
function children(dir: string): Child[] {
  return readdirSync(dir)
    .filter((name) => name.endsWith('.jsonl'))
    .flatMap((name) => {
      const lines = readFileSync(join(dir, name), 'utf8').trim().split('\n').map((line) => JSON.parse(line) as Line)
      const header = lines[0]?.header
      if (!header?.parentSession) return []
      const start = lines.find((line) => line.type === 'turn/start')
      const end = lines.findLast((line) => line.type === 'turn/end')
      const outputTokens = lines.reduce((sum, line) => sum + (line.type === 'assistant/message' ? (line.usage?.outputTokens ?? 0) : 0), 0)
      return [{ id: header.id, startedAt: start?.ts ?? NaN, endedAt: end?.ts ?? NaN, reason: end?.reason ?? 'none', outputTokens }]
    })
}

/** The most children whose turns overlapped at any moment. */
function peakConcurrency(list: Child[]): number {
  const edges = list.flatMap((child) => [
    { at: child.startedAt, delta: 1 },
    { at: child.endedAt, delta: -1 },
  ])
  // At the same millisecond an end comes first: a slot handed over is not two children at once.
  edges.sort((a, b) => a.at - b.at || a.delta - b.delta)
  let live = 0
  let peak = 0
  for (const edge of edges) peak = Math.max(peak, (live += edge.delta))
  return peak
}

/** The root's session: its tool results' text. */
function rootToolResults(dir: string): string[] {
  for (const name of readdirSync(dir).filter((file) => file.endsWith('.jsonl'))) {
    const lines = readFileSync(join(dir, name), 'utf8').trim().split('\n').map((line) => JSON.parse(line) as Line & { result?: { content: Array<{ text?: string }> } })
    if (lines[0]?.header?.parentSession) continue
    return lines.flatMap((line) => (line.type === 'tool/result' ? [line.result!.content.map((block) => block.text ?? '').join('')] : []))
  }
  return []
}

function config(dir: string, tree: object): string {
  const file = join(dir, 'dsh.yml')
  writeFileSync(file, `- id: subagents\n  name: "@dsh/subagent"\n  config: { tree: ${JSON.stringify(tree)} }\n`)
  return file
}

/** A parent that starts `n` background children in one step, then waits for every one of them. */
function fanOutScript(dir: string, n: number, child: string[]): string {
  const file = join(dir, 'script.yml')
  const ids = Array.from({ length: n }, (_, i) => i + 1)
  writeFileSync(
    file,
    [
      '- when: { depth: 1 }',
      '  reply:',
      ...child,
      '- when: { depth: 0 }',
      '  reply:',
      '    - calls:',
      ...ids.map((i) => `        - { tool: subagent, args: { description: "child ${i}", prompt: "part ${i}", run_in_background: true } }`),
      '    - calls:',
      ...ids.map((i) => `        - { tool: task_output, args: { task_id: subagent-${i}, wait: true } }`),
      '    - text: "all collected"',
    ].join('\n'),
  )
  return file
}

describe('a delegation tree through dsh run', () => {
  it('200 background children in one step with a cap of 8: at most 8 run at once and all 200 complete', async () => {
    const dir = tempDir()
    const script = fanOutScript(dir, 200, ['    - { text: "part done", delay_ms: 20 }'])
    const result = await runDsh(['run', '--config', config(dir, { maxConcurrent: 8 }), '--permission', 'allow', '--model', `scripted:${script}`, '--session-dir', dir, '--quiet', 'fan out'], { timeoutMs: 120_000 })
    expect(result.code, result.stderr).toBe(0)
    expect(result.stdout.trim()).toBe('all collected')
    const list = children(dir)
    expect(list).toHaveLength(200)
    expect(list.every((child) => child.reason === 'completed')).toBe(true)
    expect(peakConcurrency(list)).toBe(8)
    // What the parent's model read: 8 started at once, the other 192 queued, every one collected.
    const results = rootToolResults(dir)
    expect(results.filter((text) => text.startsWith('started background subagent task'))).toHaveLength(8)
    expect(results.filter((text) => text.startsWith('queued background subagent task'))).toHaveLength(192)
    expect(results.filter((text) => /^subagent-\d+ completed/.test(text))).toHaveLength(200)
  }, 150_000)

  it('a tree budget of output tokens stops a fan-out: those running are stopped, none starts after, the parent is told, the spend is within a step of the limit', async () => {
    const dir = tempDir()
    const budget = 200
    const step = '    - { text: "working through my part, one more step", call: { tool: task_list, args: {} }, delay_ms: 10 }'
    const script = fanOutScript(dir, 40, [...Array(10).fill(step), '    - text: "part done"'])
    const result = await runDsh(['run', '--config', config(dir, { maxConcurrent: 4, budget: { outputTokens: budget } }), '--permission', 'allow', '--model', `scripted:${script}`, '--session-dir', dir, 'fan out'], { timeoutMs: 60_000 })
    expect(result.code, result.stderr).toBe(0)
    expect(result.stderr).toMatch(/budget: the delegation tree's output-token budget of 200 is spent \(\d+ output tokens used by its children\): stopping 4 running and \d+ waiting children/)
    const list = children(dir)
    // The children that ran were stopped mid-work; the rest of the 40 never started.
    expect(list.length).toBeGreaterThan(0)
    expect(list.length).toBeLessThan(40)
    // Each stopped child's own session says it ended by the budget, and which one.
    const stopped = list.filter((child) => child.reason === 'budget')
    expect(stopped.length).toBeGreaterThan(0)
    expect(list.every((child) => child.reason === 'budget' || child.reason === 'completed')).toBe(true)
    const spentAt = Math.min(...stopped.map((child) => child.endedAt))
    expect(list.filter((child) => child.startedAt > spentAt)).toEqual([])
    // Each step is about 12 output tokens; at most 4 children ran a step past the limit.
    const spent = list.reduce((sum, child) => sum + child.outputTokens, 0)
    expect(spent).toBeGreaterThanOrEqual(budget)
    expect(spent).toBeLessThanOrEqual(budget + 4 * 15)
    // The parent's model read why: the stopped children and those that never started.
    const results = rootToolResults(dir)
    expect(results.filter((text) => /failed: budget: the delegation tree's output-token budget of 200 is spent .*this child was stopped/.test(text)).length).toBe(stopped.length)
    expect(results.filter((text) => /failed: the subagent could not be started: budget: .*no more children start/.test(text)).length).toBe(40 - list.length)
  })

  it('a limit of zero, a negative one or an absurd one is a clear configuration error before anything starts', async () => {
    const dir = tempDir()
    for (const tree of [{ budget: { outputTokens: 0 } }, { maxConcurrent: -1 }, { budget: { inputTokens: 1e15 } }]) {
      const result = await runDsh(['run', '--config', config(dir, tree), '--model', 'scripted:examples/hello.yml', '--session-dir', dir, 'hello'])
      expect(result.code, JSON.stringify(tree)).toBe(2)
      expect(result.stderr).toMatch(/plugin "subagents" \(@dsh\/subagent\): invalid config: .*tree\./)
      expect(result.stderr).not.toMatch(/\n\s+at /)
    }
    expect(readdirSync(dir).filter((name) => name.endsWith('.jsonl'))).toEqual([])
  })

  it('a cost budget without a price table, or a provider cap naming no provider, is one line before anything starts', async () => {
    const dir = tempDir()
    const cost = await runDsh(['run', '--config', config(dir, { budget: { cost: 2 } }), '--model', 'scripted:examples/hello.yml', '--session-dir', dir, 'hello'])
    expect(cost.code).toBe(2)
    expect(cost.stderr.trim()).toMatch(/^dsh: .*tree\.budget\.cost \(2\) needs a price table: set prices in the llm service's config/)
    const typo = await runDsh(['run', '--config', config(dir, { maxConcurrentPerProvider: { acpp: 2 } }), '--model', 'scripted:examples/hello.yml', '--session-dir', dir, 'hello'])
    expect(typo.code).toBe(2)
    expect(typo.stderr.trim()).toMatch(/^dsh: .*tree\.maxConcurrentPerProvider names subagent provider "acpp", which is not registered \(registered: spawn, fork\)/)
    expect(readdirSync(dir).filter((name) => name.endsWith('.jsonl'))).toEqual([])
  })

  it("a chain dsh run → dsh acp child → spawn grandchild: the root's budget travels with the lineage and the grandchild is stopped by it in the child's process", async () => {
    const dir = tempDir()
    const budget = 150
    const script = join(dir, 'script.yml')
    const step = '    - { text: "the grandchild works on, one more step of its task", call: { tool: task_list, args: {} } }'
    writeFileSync(script, [
      '- when: { prompt: "grand work" }',
      '  reply:',
      ...Array(40).fill(step),
      '    - text: "grandchild done"',
      '- when: { prompt: "child work" }',
      '  reply:',
      '    - call: { tool: subagent, args: { description: "grandchild", prompt: "grand work" } }',
      '    - text: "child: {{last_tool_result}}"',
      '- when: { depth: 0 }',
      '  reply:',
      '    - call: { tool: subagent_acp, args: { description: "acp child", prompt: "child work" } }',
      '    - text: "root: {{last_tool_result}}"',
    ].join('\n'))
    const file = join(dir, 'dsh.yml')
    writeFileSync(file, [
      '- id: subagents',
      '  name: "@dsh/subagent"',
      `  config: { tree: { budget: { outputTokens: ${budget} } } }`,
      '- id: subagent-acp',
      '  name: "@dsh/subagent-acp"',
      `  config: { providerName: acp, command: ${JSON.stringify(process.execPath)}, args: [${JSON.stringify(dshBin)}, acp, --model, ${JSON.stringify(`scripted:${script}`)}] }`,
      '- id: tool-subagent-acp',
      '  name: "@dsh/tool-subagent"',
      '  config: { provider: acp, toolName: subagent_acp }',
    ].join('\n'))
    const result = await runDsh(['run', '--config', file, '--permission', 'allow', '--model', `scripted:${script}`, '--session-dir', dir, 'go'], { timeoutMs: 60_000 })
    expect(result.code, result.stderr).toBe(0)
    const sessions = readdirSync(dir)
      .filter((name) => name.endsWith('.jsonl'))
      .map((name) => readFileSync(join(dir, name), 'utf8').trim().split('\n').map((line) => JSON.parse(line) as Line))
    const byDepth = (depth: number) => sessions.find((lines) => (lines[0]?.header?.delegationDepth ?? 0) === depth)!
    // The ACP child's header holds what the root's tree left it: all of it, nothing was spent before.
    expect(byDepth(1)[0]!.header!.budget).toEqual({ outputTokens: budget })
    const grandchild = byDepth(2)
    const end = grandchild.findLast((line) => line.type === 'turn/end')!
    expect(end.reason).toBe('budget')
    expect(end.error).toMatch(new RegExp(`^budget: the delegation tree's output-token budget of ${budget} is spent \\(\\d+ output tokens used in this tree, its root included\\); this child was stopped$`))
    // Stopped within a step: the child's own calls and the grandchild's together.
    const spent = [byDepth(1), grandchild].flat().reduce((sum, line) => sum + (line.type === 'assistant/message' ? (line.usage?.outputTokens ?? 0) : 0), 0)
    expect(spent).toBeGreaterThanOrEqual(budget)
    expect(spent).toBeLessThanOrEqual(budget + 20)
    // The ACP child, a child of the root's tree, was stopped with it, and the root read which budget.
    expect(byDepth(1).findLast((line) => line.type === 'turn/end')!.reason).toBe('budget')
    expect(result.stdout).toMatch(/root: the subagent ended budget: the delegation tree's output-token budget of 150 is spent/)
  })

  it('a child over its wall-time budget is stopped and reported as such', async () => {
    const dir = tempDir()
    const script = join(dir, 'script.yml')
    writeFileSync(script, [
      '- when: { prompt: "slow work" }',
      '  reply:',
      // Longer than the run may take (20 s): the child ends in time only because its budget stopped it.
      '    - { text: "still thinking", delay_ms: 60000 }',
      '- when: { depth: 0 }',
      '  reply:',
      '    - call: { tool: subagent, args: { agent: slowpoke, description: "slow", prompt: "slow work" } }',
      '    - text: "root: {{last_tool_result}}"',
    ].join('\n'))
    const agents = join(dir, '.dsh', 'agents')
    await import('node:fs').then(({ mkdirSync }) => mkdirSync(agents, { recursive: true }))
    writeFileSync(join(agents, 'slowpoke.md'), ['---', 'name: slowpoke', 'description: Takes its time.', 'maxWallTimeMs: 400', '---', 'You take your time.', ''].join('\n'))
    const result = await runDsh(['run', '--model', `scripted:${script}`, '--session-dir', join(dir, 'sessions'), 'go'], { cwd: dir, env: { DSH_HOME: dir }, timeoutMs: 20_000 })
    expect(result.code, result.stderr).toBe(0)
    expect(result.stdout).toMatch(/root: the subagent ended budget: this child's wall-time budget of 0\.4 s is spent; it was stopped/)
    const child = children(join(dir, 'sessions'))[0]!
    expect(child.reason).toBe('budget')
  })

  it('--json carries the queued delegations and the budget events, and the root\'s model reads the warning at 80% and the spend', async () => {
    const dir = tempDir()
    const step = '    - { text: "working through my part, one more step", call: { tool: task_list, args: {} }, delay_ms: 10 }'
    const script = fanOutScript(dir, 6, [...Array(10).fill(step), '    - text: "part done"'])
    const result = await runDsh(['run', '--json', '--config', config(dir, { maxConcurrent: 2, budget: { outputTokens: 100 } }), '--permission', 'allow', '--model', `scripted:${script}`, '--session-dir', dir, 'fan out'], { timeoutMs: 60_000 })
    expect(result.code, result.stderr).toBe(0)
    const records = result.stdout.trim().split('\n').map((line) => JSON.parse(line) as { kind: string; event?: string; limit?: string; queued?: boolean; used?: number; bound?: number })
    const queued = records.filter((record) => record.kind === 'subagent/queued')
    expect(queued.filter((record) => record.queued).length).toBeGreaterThanOrEqual(4)
    expect(queued.filter((record) => record.queued).length).toBe(queued.filter((record) => !record.queued).length)
    const budget = records.filter((record) => record.kind === 'subagent/budget')
    expect(budget.map((record) => `${record.event} ${record.limit}`).slice(0, 2)).toEqual(['warning outputTokens', 'spent outputTokens'])
    expect(budget[0]!.used! / budget[0]!.bound!).toBeGreaterThanOrEqual(0.8)
    const root = readdirSync(dir).map((name) => readFileSync(join(dir, name), 'utf8')).find((text) => text.includes('"origin":"cli"'))!
    expect(root).toContain('budget warning: the delegation tree has used')
    expect(root).toContain("budget: the delegation tree's output-token budget of 100 is spent")
  })
})

