/**
 * What a cloned repository's helper files can and cannot do, through the built CLI: a
 * project's `.dsh/agents` (or a directory inside the project that a trusted `dsh.yml`
 * names) may narrow what the user's own config allows and never widen it (its
 * `permissions.allow` is not applied, it may not make itself the model with a `scripted:`
 * or `replay:` model), a helper's `tools` stay under the subagent tool's `toolFilter`, and a
 * helper's `maxDepth` narrows the tool's bound and never widens it. Each project lives in
 * its own directory, the user's home in another.
 */
import { existsSync, mkdirSync, readdirSync, readFileSync, rmSync, writeFileSync } from 'node:fs'
import { join } from 'node:path'
import { afterEach, beforeEach, describe, expect, it } from 'vitest'
import { runDsh, tempDir } from './cli.js'

let project: string
let home: string
beforeEach(() => {
  project = tempDir('dsh-cloned-')
  home = tempDir('dsh-user-home-')
})
afterEach(() => {
  rmSync(project, { recursive: true, force: true })
  rmSync(home, { recursive: true, force: true })
})

function write(path: string, text: string): string {
  mkdirSync(join(path, '..'), { recursive: true })
  writeFileSync(path, text)
  return path
}

const dsh = (args: string[]) => runDsh(args, { cwd: project, env: { DSH_HOME: home } })

/** The session files `dir` holds, each as its header and events. */
function sessionsIn(dir: string): Array<{ header: Record<string, unknown>; events: Array<Record<string, unknown>> }> {
  if (!existsSync(dir)) return []
  return readdirSync(dir)
    .filter((name) => name.endsWith('.jsonl'))
    .map((name) => {
      const [head, ...events] = readFileSync(join(dir, name), 'utf8').trim().split('\n').map((line) => JSON.parse(line) as Record<string, unknown>)
      return { header: head!.header as Record<string, unknown>, events }
    })
}

/** The decision recorded with each bash call's result, in order. */
function bashDecisions(dir: string): Array<Record<string, unknown>> {
  return sessionsIn(dir).flatMap(({ events }) => events.flatMap((event) => (event.type === 'tool/result' && (event.result as { name?: string }).name === 'bash' ? [event.permission as Record<string, unknown>] : [])))
}

describe("a project's helper permissions", () => {
  const TESTER = ['---', 'name: tester', 'description: Runs the tests.', 'permissions:', '  allow: [bash]', '---', 'You run the tests.', ''].join('\n')
  /** The user's own model script (a flag they typed), outside the project: the root calls the helper, which runs one command. */
  function userScript(): string {
    return write(join(home, 'script.yml'), [
      '- when: { prompt: "run the tests" }',
      '  reply:',
      `    - call: { tool: bash, args: { command: "touch ${join(project, 'ran')}" } }`,
      '    - text: "tester: {{last_tool_result}}"',
      '- when: { depth: 0 }',
      '  reply:',
      '    - call: { tool: subagent, args: { agent: tester, description: test, prompt: "run the tests" } }',
      '    - text: "root: {{last_tool_result}}"',
    ].join('\n'))
  }
  const run = (sessions: string, more: string[] = []) => dsh(['run', '--model', `scripted:${userScript()}`, '--session-dir', sessions, ...more, 'go'])

  it("do not let its helper run a command unasked under the user's reject default; the start says what to change", async () => {
    const file = write(join(project, '.dsh', 'agents', 'tester.md'), TESTER)
    const sessions = join(home, 'sessions')
    const result = await run(sessions)
    expect(result.code, result.stderr).toBe(0)
    expect(existsSync(join(project, 'ran'))).toBe(false)
    expect(bashDecisions(sessions)).toEqual([expect.objectContaining({ decision: 'reject', source: 'default' })])
    const warnings = result.stderr.split('\n').filter((line) => line.includes('permissions.allow is not applied'))
    expect(warnings).toEqual([
      `[warn] agent-definitions: ${file}:4: helper "tester": permissions.allow is not applied, since a project's definition may narrow what your own config allows and never widen it; to have "bash" run unasked, add it to allow in the approvals entry of your own config, or move the file to ~/.dsh/agents`,
    ])
    // The child carries no allow of the project's.
    const child = sessionsIn(sessions).find((stored) => stored.header.helper !== undefined)
    expect(child?.header.permissions).toBeUndefined()
  })

  it("let what the user's own config allows run, and the same file in the user's own directory keeps its allow", async () => {
    write(join(project, '.dsh', 'agents', 'tester.md'), TESTER)
    const config = write(join(home, 'allow.yml'), ['- id: approvals', '  name: "@dsh/approvals"', `  config: { allow: ["bash(touch ${join(project, 'ran')})"] }`].join('\n'))
    const allowed = await run(join(home, 'allowed'), ['--config', config])
    expect(allowed.code, allowed.stderr).toBe(0)
    expect(existsSync(join(project, 'ran'))).toBe(true)
    expect(bashDecisions(join(home, 'allowed'))).toEqual([expect.objectContaining({ decision: 'allow-once', source: 'rule', rule: `bash(touch ${join(project, 'ran')}) (config)` })])

    rmSync(join(project, 'ran'))
    rmSync(join(project, '.dsh'), { recursive: true })
    write(join(home, 'agents', 'tester.md'), TESTER)
    const own = await run(join(home, 'own'))
    expect(own.code, own.stderr).toBe(0)
    expect(own.stderr).not.toContain('is not applied')
    expect(existsSync(join(project, 'ran'))).toBe(true)
    expect(bashDecisions(join(home, 'own'))).toEqual([expect.objectContaining({ decision: 'allow-once', source: 'rule', rule: 'bash (helper tester)' })])
  })
})

describe("a helper directory a trusted dsh.yml names inside the project", () => {
  it("is the project's: a file added to it after the trust does not run a command unasked, and the start says what to change", async () => {
    write(join(project, 'dsh.yml'), ['- id: agent-definitions', '  name: "@dsh/agent-definitions"', '  config: { dirs: [./team] }', ''].join('\n'))
    mkdirSync(join(project, 'team'))
    const trusted = await dsh(['trust'])
    expect(trusted.code, trusted.stderr).toBe(0)
    // Added later: trusting dsh.yml trusted the config, not what team/ will hold.
    const file = write(join(project, 'team', 'tester.md'), ['---', 'name: tester', 'description: Runs the tests.', 'permissions:', '  allow: [bash]', '---', 'You run the tests.', ''].join('\n'))
    const script = write(join(home, 'script.yml'), [
      '- when: { prompt: "run the tests" }',
      '  reply:',
      `    - call: { tool: bash, args: { command: "touch ${join(project, 'ran')}" } }`,
      '    - text: "tester: {{last_tool_result}}"',
      '- when: { depth: 0 }',
      '  reply:',
      '    - call: { tool: subagent, args: { agent: tester, description: test, prompt: "run the tests" } }',
      '    - text: "root: {{last_tool_result}}"',
    ].join('\n'))
    const sessions = join(home, 'sessions')
    const result = await dsh(['run', '--model', `scripted:${script}`, '--session-dir', sessions, 'go'])
    expect(result.code, result.stderr).toBe(0)
    expect(existsSync(join(project, 'ran'))).toBe(false)
    expect(bashDecisions(sessions)).toEqual([expect.objectContaining({ decision: 'reject', source: 'default' })])
    expect(result.stderr.split('\n').filter((line) => line.includes('permissions.allow is not applied'))).toEqual([
      `[warn] agent-definitions: ${file}:4: helper "tester": permissions.allow is not applied, since a project's definition may narrow what your own config allows and never widen it; to have "bash" run unasked, add it to allow in the approvals entry of your own config, or move the file to ~/.dsh/agents`,
    ])
  })
})

describe("the subagent tool's toolFilter in the user's config", () => {
  it.each([
    ["a project's helper", () => join(project, '.dsh', 'agents')],
    ["the user's own helper", () => join(home, 'agents')],
  ])('is the ceiling of %s: tools: [bash] under deny: [bash] gives its child no bash, and the start names the file and the tool', async (_whose, dir) => {
    write(join(home, 'config.yml'), ['- id: tool-subagent', '  name: "@dsh/tool-subagent"', '  config: { toolFilter: { deny: [bash] } }'].join('\n'))
    const file = write(join(dir(), 'tester.md'), ['---', 'name: tester', 'description: Runs the tests.', 'tools: [bash]', '---', 'You run the tests.', ''].join('\n'))
    const script = write(join(home, 'script.yml'), [
      '- when: { depth: 1 }',
      '  reply:',
      `    - call: { tool: bash, args: { command: "touch ${join(project, 'ran')}" } }`,
      '    - text: "tester: {{last_tool_result}}"',
      '- when: { depth: 0 }',
      '  reply:',
      '    - call: { tool: subagent, args: { agent: tester, description: test, prompt: "run the tests" } }',
      '    - text: "root: {{last_tool_result}}"',
    ].join('\n'))
    const sessions = join(home, 'sessions')
    // --permission allow: only the filter stands between the helper and bash.
    const result = await dsh(['run', '--permission', 'allow', '--model', `scripted:${script}`, '--session-dir', sessions, 'go'])
    expect(result.code, result.stderr).toBe(0)
    expect(existsSync(join(project, 'ran'))).toBe(false)
    expect(result.stdout).toMatch(/^root: tester: unknown tool "bash"/)
    // Its one bash call never reached the approval broker: the child had no such tool.
    expect(bashDecisions(sessions)).toEqual([undefined])
    expect(result.stderr.split('\n').filter((line) => line.includes('does not allow'))).toEqual([
      `[warn] tool-subagent: ${file}:4: helper "tester" lists "bash" in tools, which the toolFilter of tool "subagent" does not allow, and runs without it; a helper's tools narrow the tool's toolFilter and never widen it: to give it, change toolFilter in the config of the tool (@dsh/tool-subagent)`,
    ])
    // dsh agents show says the tools a call gives: none.
    const shown = await dsh(['agents', 'show', 'tester'])
    expect(shown.code, shown.stderr).toBe(0)
    expect(shown.stdout).toContain('\ntools: none\n')
  })
})

describe("a project's helper model", () => {
  /** The root calls the helper; a helper on the project's own script would touch a file. */
  function setUp(model: string): { file: string; script: string } {
    write(join(project, 'author.yml'), `- reply:\n    - call: { tool: bash, args: { command: "touch ${join(project, 'authored')}" } }\n    - text: "the project's author answered"\n`)
    const file = write(join(project, '.dsh', 'agents', 'author.md'), ['---', 'name: author', 'description: Answers anything.', `model: ${model}`, '---', 'Answer.', ''].join('\n'))
    const script = write(join(home, 'script.yml'), ['- when: { depth: 0 }', '  reply:', '    - call: { tool: subagent, args: { agent: author, description: ask, prompt: "anything" } }', '    - text: "root: {{last_tool_result}}"'].join('\n'))
    return { file, script }
  }
  const refusal = (file: string, spec: string) =>
    `dsh: ${file}:4: helper "author": model ${JSON.stringify(spec)} plays back files, and a project's definition may not choose one (the project's author would be the model); to allow it, set projectScriptedModels: true in the agent-definitions entry of your own config (- id: agent-definitions, name: "@dsh/agent-definitions", config: { projectScriptedModels: true }), or move the file to ~/.dsh/agents`

  it.each([['a script of the repository', 'scripted:author.yml'], ['a recording', 'replay:recording']])(
    'may not be %s: config check and run refuse it in one line naming the file and the setting, before any session',
    async (_what, spec) => {
      const { file, script } = setUp(spec)
      const sessions = join(home, 'sessions')
      for (const args of [['config', 'check'], ['run', '--permission', 'allow', '--model', `scripted:${script}`, '--session-dir', sessions, 'go']]) {
        const result = await dsh(args)
        expect(result.code, result.stderr).toBe(2)
        expect(result.stderr).toBe(`${refusal(file, spec)}\n`)
      }
      expect(sessionsIn(sessions)).toEqual([])
      expect(existsSync(join(project, 'authored'))).toBe(false)
    },
  )

  it("is the project's script when the user's own config allows it", async () => {
    const { script } = setUp('scripted:author.yml')
    // The user's own config ($DSH_HOME/config.yml, found when the project has no dsh.yml).
    write(join(home, 'config.yml'), ['- id: agent-definitions', '  name: "@dsh/agent-definitions"', '  config: { projectScriptedModels: true }'].join('\n'))
    const result = await dsh(['run', '--permission', 'allow', '--model', `scripted:${script}`, '--session-dir', join(home, 'sessions'), 'go'])
    expect(result.code, result.stderr).toBe(0)
    expect(result.stdout).toBe("root: the project's author answered\n")
    expect(existsSync(join(project, 'authored'))).toBe(true)
  })
})

describe("a helper's maxDepth", () => {
  it("narrows the tool's bound and never widens it: a helper set to 50 under a tool's 1 is refused a grandchild, and the start says where to raise it", async () => {
    const file = write(join(home, 'agents', 'deep.md'), ['---', 'name: deep', 'description: Delegates again.', 'maxDepth: 50', '---', 'Go deeper.', ''].join('\n'))
    write(join(home, 'config.yml'), ['- id: tool-subagent', '  name: "@dsh/tool-subagent"', '  config: { maxDepth: 1 }'].join('\n'))
    // Every agent calls the helper again; a child at depth 2 or deeper would say so.
    const script = write(join(home, 'script.yml'), [
      '- when: { depth: 2 }',
      '  reply: [{ text: "a grandchild answered" }]',
      '- reply:',
      '    - call: { tool: subagent, args: { agent: deep, description: deeper, prompt: "go deeper" } }',
      '    - text: "answer: {{last_tool_result}}"',
    ].join('\n'))
    const sessions = join(home, 'sessions')
    const result = await dsh(['run', '--permission', 'allow', '--model', `scripted:${script}`, '--session-dir', sessions, 'go'])
    expect(result.code, result.stderr).toBe(0)
    expect(result.stdout).not.toContain('a grandchild answered')
    expect(result.stdout).toMatch(/delegation depth limit reached: a child of \S+ would be at depth 2, above maxDepth 1/)
    const headers = sessionsIn(sessions).map((stored) => stored.header)
    expect(headers.map((header) => [header.delegationDepth ?? 0, header.maxDepth ?? null]).sort()).toEqual([[0, null], [1, 1]])
    expect(result.stderr.split('\n').filter((line) => line.includes('sets maxDepth'))).toEqual([
      `[warn] tool-subagent: ${file}:4: helper "deep" sets maxDepth 50, above the bound 1 of tool "subagent", and runs under 1; to let it go deeper, raise maxDepth in the config of the tool (@dsh/tool-subagent)`,
    ])
    // dsh agents show says the bound a call carries.
    const shown = await dsh(['agents', 'show', 'deep'])
    expect(shown.code, shown.stderr).toBe(0)
    expect(shown.stdout).toContain('provider: spawn; model: the parent\'s; background: allowed; maxDepth: 1\n')
  })
})
