/**
 * The MCP client through the built CLI: a config names a server (the MCP client's test
 * fixture, a real process on the SDK's server classes) and a scripted model calls its tools
 * from the root and from a spawned child: a read-only tool runs unasked, a side-effecting one
 * is refused under --permission reject (the server never sees it) unless a rule of the
 * config names its server's tools (`mcp__srv__*`), and no process of the server outlives dsh.
 */
import { existsSync, mkdirSync, readdirSync, readFileSync, writeFileSync } from 'node:fs'
import { join } from 'node:path'
import { describe, expect, it } from 'vitest'
import { exists } from '@dsh/testkit'
import { repoRoot, runDsh, tempDir } from './cli.js'

const FIXTURE = join(repoRoot, 'packages/mcp/mcp/tests/fixtures/server.mjs')

/** Every tool result of every session of the run, as `name: text`. */
function toolResults(sessions: string): string[] {
  return readdirSync(sessions)
    .filter((name) => name.endsWith('.jsonl'))
    .flatMap((name) => readFileSync(join(sessions, name), 'utf8').split('\n').filter(Boolean).map((line) => JSON.parse(line) as { type?: string; result?: { name: string; content: { text: string }[] } }))
    .flatMap((event) => (event.type === 'tool/result' && event.result ? [`${event.result.name}: ${event.result.content.map((part) => part.text).join('')}`] : []))
}

/** Whether `pid` runs (a zombie waiting for init to collect it does not). */
function running(pid: number): boolean {
  if (!exists(pid)) return false
  try {
    return !/^\d+ \(.*\) Z /s.test(readFileSync(`/proc/${pid}/stat`, 'utf8'))
  } catch {
    return false
  }
}

function fixture(allow: string[]): { dir: string; log: string; args: string[] } {
  const dir = tempDir()
  const log = join(dir, 'calls.log')
  const config = [
    '- name: "@dsh/mcp"',
    `  config: { servers: { srv: { command: ${JSON.stringify(process.execPath)}, args: [${JSON.stringify(FIXTURE)}], env: { CALL_LOG: ${JSON.stringify(log)} }, readOnlyHints: true } } }`,
    ...(allow.length ? ['- id: approvals', '  name: "@dsh/approvals"', `  config: { allow: ${JSON.stringify(allow)} }`] : []),
  ]
  writeFileSync(join(dir, 'dsh.yml'), `${config.join('\n')}\n`)
  const script = [
    '- when: { prompt: "look it up" }',
    '  reply:',
    '    - call: { tool: mcp__srv__echo, args: { text: "from the child" } }',
    '    - text: "child: {{last_tool_result}}"',
    '- when: { depth: 0 }',
    '  reply:',
    '    - call: { tool: mcp__srv__family, args: {} }',
    '    - call: { tool: mcp__srv__note, args: { line: "written" } }',
    '    - call: { tool: subagent, args: { description: helper, prompt: "look it up" } }',
    '    - text: "root: {{last_tool_result}}"',
  ]
  writeFileSync(join(dir, 'script.yml'), `${script.join('\n')}\n`)
  return { dir, log, args: ['run', '--config', join(dir, 'dsh.yml'), '--model', `scripted:${join(dir, 'script.yml')}`, '--session-dir', join(dir, 'sessions'), '--permission', 'reject', '--quiet', 'go'] }
}

describe('MCP tools through dsh run', () => {
  it('a child calls a read-only MCP tool, a side-effecting one is refused under --permission reject, and no server process outlives dsh', async () => {
    const { dir, log, args } = fixture([])
    const result = await runDsh(args, { cwd: dir, env: { DSH_HOME: join(dir, 'home') }, timeoutMs: 60_000 })
    expect(result.code, result.stderr).toBe(0)
    expect(result.stdout).toContain('root: child: echo: from the child')
    const results = toolResults(join(dir, 'sessions'))
    expect(results).toContain('mcp__srv__echo: echo: from the child')
    expect(results).toContain('mcp__srv__note: mcp__srv__note was not run: permission denied by dsh run --permission reject: nobody is there to ask, and side effects are refused without an answer')
    expect(existsSync(log)).toBe(false)
    const pids = results.find((line) => line.startsWith('mcp__srv__family: '))!.slice('mcp__srv__family: '.length).split(' ').map(Number)
    expect(pids).toHaveLength(2)
    for (const pid of pids) expect(running(pid)).toBe(false)
  })

  it('a rule of the config naming the server\'s tools (mcp__srv__*) lets the side-effecting call through', async () => {
    const { dir, log, args } = fixture(['mcp__srv__*'])
    const result = await runDsh(args, { cwd: dir, env: { DSH_HOME: join(dir, 'home') }, timeoutMs: 60_000 })
    expect(result.code, result.stderr).toBe(0)
    expect(toolResults(join(dir, 'sessions'))).toContain('mcp__srv__note: noted')
    expect(readFileSync(log, 'utf8')).toBe('written\n')
  })

  it('a helper whose tools: name one MCP tool calls it, and the server\'s other tools are unknown to it', async () => {
    const { dir, args } = fixture([])
    const home = join(dir, 'home')
    mkdirSync(join(home, 'agents'), { recursive: true })
    writeFileSync(join(home, 'agents', 'looker.md'), '---\nname: looker\ndescription: Looks things up.\ntools: [mcp__srv__echo]\n---\nYou look things up.\n')
    writeFileSync(join(dir, 'script.yml'), [
      '- when: { prompt: "look it up" }',
      '  reply:',
      '    - call: { tool: mcp__srv__note, args: { line: "from the helper" } }',
      '    - call: { tool: mcp__srv__echo, args: { text: "from the helper" } }',
      '    - text: "helper: {{last_tool_result}}"',
      '- when: { depth: 0 }',
      '  reply:',
      '    - call: { tool: subagent, args: { agent: looker, description: helper, prompt: "look it up" } }',
      '    - text: "root: {{last_tool_result}}"',
      '',
    ].join('\n'))
    const result = await runDsh(args, { cwd: dir, env: { DSH_HOME: home }, timeoutMs: 60_000 })
    expect(result.code, result.stderr).toBe(0)
    expect(result.stdout).toContain('root: helper: echo: from the helper')
    expect(toolResults(join(dir, 'sessions'))).toContain('mcp__srv__note: unknown tool "mcp__srv__note" (available: mcp__srv__echo)')
  })

  it('a helper\'s tools: mcp__srv__* gives it the server\'s tools; a sibling whose tools leave them out, or whose disallowedTools name them, cannot see them', async () => {
    const { dir, args } = fixture([])
    const home = join(dir, 'home')
    mkdirSync(join(home, 'agents'), { recursive: true })
    const helper = (name: string, line: string) => writeFileSync(join(home, 'agents', `${name}.md`), `---\nname: ${name}\ndescription: Looks things up.\n${line}\n---\nYou look things up.\n`)
    helper('with-mcp', 'tools: [read, "mcp__srv__*"]')
    helper('without', 'tools: [read]')
    helper('denied', 'disallowedTools: ["mcp__srv__*"]')
    writeFileSync(join(dir, 'script.yml'), [
      '- when: { prompt: "^look it up" }',
      '  reply:',
      '    - call: { tool: mcp__srv__echo, args: { text: "reached" } }',
      '    - text: "{{last_tool_result}}"',
      '- when: { depth: 0 }',
      '  reply:',
      '    - calls:',
      '        - { tool: subagent, args: { agent: with-mcp, description: one, prompt: "look it up 1" } }',
      '        - { tool: subagent, args: { agent: without, description: two, prompt: "look it up 2" } }',
      '        - { tool: subagent, args: { agent: denied, description: three, prompt: "look it up 3" } }',
      '    - text: "root: {{tool_results}}"',
      '',
    ].join('\n'))
    const result = await runDsh(args, { cwd: dir, env: { DSH_HOME: home }, timeoutMs: 60_000 })
    expect(result.code, result.stderr).toBe(0)
    const echoes = toolResults(join(dir, 'sessions')).filter((line) => line.startsWith('mcp__srv__echo: '))
    expect(echoes.filter((line) => line === 'mcp__srv__echo: echo: reached')).toHaveLength(1)
    expect(echoes.filter((line) => line.startsWith('mcp__srv__echo: unknown tool "mcp__srv__echo"'))).toHaveLength(2)
    expect(echoes).toHaveLength(3)
  })
})
