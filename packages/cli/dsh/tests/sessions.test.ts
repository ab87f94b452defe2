import { existsSync, readdirSync, readFileSync, writeFileSync } from 'node:fs'
import { join } from 'node:path'
import { describe, expect, it } from 'vitest'
import { budgetRefusals } from './budget-refusals.js'
import { repoRoot, runDsh, tempDir } from './cli.js'

const config = join(repoRoot, 'examples/delegate.yml')
const script = join(repoRoot, 'examples/delegate-script.yml')

async function delegatedRun(dir: string) {
  const result = await runDsh(['run', '--quiet', '--config', config, '--model', `scripted:${script}`, '--session-dir', dir, 'review the plan'])
  expect(result.code).toBe(0)
}

describe('dsh sessions', () => {
  it('list shows the root session with its child count and first prompt, newest first', async () => {
    const dir = tempDir()
    await delegatedRun(dir)
    const plain = await runDsh(['run', '--model', 'scripted:examples/hello.yml', '--session-dir', dir, 'hello again'])
    expect(plain.code).toBe(0)
    const result = await runDsh(['sessions', 'list', '--session-dir', dir])
    expect(result.code).toBe(0)
    const lines = result.stdout.trim().split('\n')
    expect(lines).toHaveLength(2)
    expect(lines[0]).toMatch(/0 children {2}hello again$/)
    expect(lines[1]).toMatch(/2 children {2}review the plan$/)
  })

  it('tree shows the lineage from the headers: parent, then children with provider and stop reason', async () => {
    const dir = tempDir()
    await delegatedRun(dir)
    const result = await runDsh(['sessions', 'tree', '--session-dir', dir])
    expect(result.code).toBe(0)
    const lines = result.stdout.trim().split('\n')
    expect(lines).toHaveLength(3)
    expect(lines[0]).toMatch(/^\S+ {2}cli "review the plan" {2}completed$/)
    expect(lines.slice(1).join('\n')).toMatch(/^├─ \S+ {2}spawn "find risks" {2}completed\n└─ \S+ {2}fork "propose a fix" {2}completed/)
  })

  it('tree and list show the children a budget refused before they started, foreground and background, each on a line saying not started and why', async () => {
    const dir = tempDir()
    const { config, script } = budgetRefusals(dir)
    const run = await runDsh(['run', '--quiet', '--config', config, '--model', `scripted:${script}`, '--session-dir', join(dir, 'sessions'), 'go'], { cwd: dir })
    expect(run.code, run.stderr).toBe(0)
    const tree = await runDsh(['sessions', 'tree', '--session-dir', join(dir, 'sessions')])
    expect(tree.code).toBe(0)
    const lines = tree.stdout.trim().split('\n')
    expect(lines).toHaveLength(4)
    expect(lines[0]).toMatch(/^\S+ {2}cli "go" {2}completed$/)
    expect(lines[1]).toMatch(/^├─ \S+ {2}spawn "first" {2}completed$/)
    expect(lines[2]).toMatch(/^├─ call \S+ {2}subagent "refused" {2}not started: budget: the delegation tree's children budget of 1 is spent/)
    expect(lines[3]).toMatch(/^└─ subagent-1 {2}subagent "too late" {2}not started: budget: the delegation tree's children budget of 1 is spent/)
    const list = await runDsh(['sessions', 'list', '--session-dir', join(dir, 'sessions')])
    expect(list.stdout).toMatch(/ 3 children {2}go\n$/)
  })

  it('tree draws every kind of child in the order the parent asked for them, a refused one before a started one it asked for later', async () => {
    const dir = tempDir()
    const sessions = join(dir, 'sessions')
    const { config, script } = budgetRefusals(dir)
    expect((await runDsh(['run', '--quiet', '--config', config, '--model', `scripted:${script}`, '--session-dir', sessions, 'go'], { cwd: dir })).code).toBe(0)
    // Make the parent have asked for "refused" before "first": swap what the two calls asked, so the child that started was asked second.
    const file = readdirSync(sessions)
      .filter((name) => name.endsWith('.jsonl'))
      .map((name) => join(sessions, name))
      .find((path) => !readFileSync(path, 'utf8').split('\n', 1)[0]!.includes('"parentSession"'))!
    const lines = readFileSync(file, 'utf8').split('\n')
    const callLine = (label: string) => lines.findIndex((line) => line.includes('"tool/call"') && line.includes(`"description":"${label}"`))
    const [first, refused] = [callLine('first'), callLine('refused')]
    expect(first).toBeGreaterThan(0)
    expect(refused).toBeGreaterThan(first)
    const [a, b] = [JSON.parse(lines[first]!), JSON.parse(lines[refused]!)]
    ;[lines[first], lines[refused]] = [JSON.stringify({ ...a, call: b.call }), JSON.stringify({ ...b, call: a.call })]
    writeFileSync(file, lines.join('\n'))
    const tree = await runDsh(['sessions', 'tree', '--session-dir', sessions])
    expect(tree.code, tree.stderr).toBe(0)
    expect(tree.stdout.trim().split('\n').slice(1).map((line) => /"([^"]+)"/.exec(line)?.[1])).toEqual(['refused', 'first', 'too late'])
  })

  it('show prints a readable transcript with tool calls and results', async () => {
    const dir = tempDir()
    await delegatedRun(dir)
    const tree = await runDsh(['sessions', 'tree', '--session-dir', dir])
    const rootId = tree.stdout.split(' ')[0]
    const result = await runDsh(['sessions', 'show', rootId.slice(-6), '--session-dir', dir])
    expect(result.code).toBe(0)
    expect(result.stdout).toContain('user: review the plan')
    expect(result.stdout).toContain('  → subagent {"description":"find risks"')
    expect(result.stdout).toContain('  ← subagent_fork: fix: add a down-migration first')
    expect(result.stdout).toContain('── turn 1 ended completed')
  })

  it('show prints text from a session file with its control characters escaped, keeping newlines and tabs', async () => {
    const dir = tempDir()
    const hostile = 'look \u001b]0;owned\u0007 and \u001b[31mred\u001b[0m\there\nsecond line'
    const run = await runDsh(['run', '--quiet', '--model', 'scripted:examples/hello.yml', '--session-dir', dir, hostile])
    expect(run.code, run.stderr).toBe(0)
    const id = readdirSync(dir).find((name) => name.endsWith('.jsonl'))!.replace(/\.jsonl$/, '')
    const result = await runDsh(['sessions', 'show', id, '--session-dir', dir])
    expect(result.code).toBe(0)
    expect(result.stdout).not.toMatch(/[\u001b\u0007]/)
    expect(result.stdout).toContain('user: look \\x1b]0;owned\\x07 and \\x1b[31mred\\x1b[0m\there\n      second line')
  })

  it('show of an unknown id exits 2 and says so', async () => {
    const result = await runDsh(['sessions', 'show', 'nope', '--session-dir', tempDir()])
    expect(result.code).toBe(2)
    expect(result.stderr).toContain('no stored session nope')
  })
})

describe('dsh config check', () => {
  it('prints the composed plugin list', async () => {
    const result = await runDsh(['config', 'check', '--config', config])
    expect(result.code).toBe(0)
    expect(result.stdout).toMatch(/tool-subagent-fork +@dsh\/tool-subagent +\{"provider":"fork","toolName":"subagent_fork"\}/)
    expect(result.stdout).toContain('subagent providers: spawn, fork')
  })

  it('a bad config key exits non-zero with the plugin and the key named', async () => {
    const dir = tempDir()
    const file = join(dir, 'dsh.yml')
    writeFileSync(file, '- id: tool-subagent\n  name: "@dsh/tool-subagent"\n  config:\n    maxDepth: -2\n')
    const result = await runDsh(['config', 'check', '--config', file])
    expect(result.code).toBe(2)
    expect(result.stderr).toContain('"tool-subagent"')
    expect(result.stderr).toContain('maxDepth')
  })

  it('an unknown config key is an error naming the plugin, the key and the allowed keys', async () => {
    const dir = tempDir()
    const file = join(dir, 'dsh.yml')
    writeFileSync(file, '- id: tool-subagent\n  name: "@dsh/tool-subagent"\n  config:\n    provider: spawn\n    maxDepht: 2\n')
    const result = await runDsh(['config', 'check', '--config', file])
    expect(result.code).toBe(2)
    expect(result.stderr).toMatch(/plugin "tool-subagent" \(@dsh\/tool-subagent\): unknown config key "maxDepht" \(allowed there: .*maxDepth/)
  })

  it('a subagent tool bound to a provider that is not registered fails the check and the run alike, before any session', async () => {
    const dir = tempDir()
    const file = join(dir, 'dsh.yml')
    writeFileSync(file, '- id: tool-typo\n  name: "@dsh/tool-subagent"\n  config: { provider: spwan, toolName: helper }\n')
    const check = await runDsh(['config', 'check', '--config', file])
    expect(check.code).toBe(2)
    expect(check.stderr).toContain('tool "helper" is bound to subagent provider "spwan", which is not registered (registered: spawn, fork) (entry "tool-typo")')
    const sessions = join(dir, 'sessions')
    const run = await runDsh(['run', '--config', file, '--model', 'scripted:examples/hello.yml', '--session-dir', sessions, 'hello'])
    expect(run.code).toBe(2)
    expect(run.stderr).toBe(check.stderr)
    expect(existsSync(sessions) ? readdirSync(sessions) : []).toEqual([])
  })

  it('finds dsh.yml in the working directory without --config, once trusted', async () => {
    const dir = tempDir()
    const home = tempDir('dsh-home-')
    writeFileSync(join(dir, 'dsh.yml'), '- id: agents\n  name: "@dsh/agent"\n  config:\n    persona: 42\n')
    expect((await runDsh(['trust'], { cwd: dir, env: { DSH_HOME: home } })).code).toBe(0)
    const result = await runDsh(['config', 'check'], { cwd: dir, env: { DSH_HOME: home } })
    expect(result.code).toBe(2)
    expect(result.stderr).toContain(join(dir, 'dsh.yml'))
    expect(result.stderr).toContain('persona')
  })
})
