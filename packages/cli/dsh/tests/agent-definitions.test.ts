import { existsSync, mkdirSync, readdirSync, readFileSync, rmSync, writeFileSync } from 'node:fs'
import { join } from 'node:path'
import { afterEach, beforeEach, describe, expect, it } from 'vitest'
import { dshBin, runDsh, tempDir } from './cli.js'

/**
 * A parent with three helpers defined in files: a spawn reviewer with a read-only tool set,
 * a fork planner on another model, and an ACP helper (a `dsh acp` child on its own scripted
 * model): keyless, through the built CLI. What each child got is read from its first model
 * request, as `--record` stored it.
 */
let project: string
let home: string
beforeEach(() => {
  project = tempDir('dsh-defs-project-')
  home = tempDir('dsh-defs-home-')
})
afterEach(() => {
  rmSync(project, { recursive: true, force: true })
  rmSync(home, { recursive: true, force: true })
})

const agentsDir = () => join(project, '.dsh', 'agents')
function write(file: string, text: string): string {
  const path = join(project, file)
  mkdirSync(join(path, '..'), { recursive: true })
  writeFileSync(path, text)
  return path
}

const REVIEWER = `---
name: reviewer
description: Reviews a change for bugs; give it the change.
tools: [task_list, task_output]
---
You are the reviewer persona.
`
const PLANNER = `---
name: planner
description: Plans the work from what was said so far.
provider: fork
model: scripted:planner.yml
---
You are the planner persona.
`
const OUTSIDE = `---
name: outside
description: Answers geography questions in its own process.
provider: acp
---
You are the acp helper persona.
`

async function setUpProject(): Promise<void> {
  write('.dsh/agents/reviewer.md', REVIEWER)
  write('.dsh/agents/planner.md', PLANNER)
  write('.dsh/agents/outside.md', OUTSIDE)
  write(
    'parent.yml',
    `- when: {depth: 0}
  reply:
    - calls:
        - {tool: subagent, args: {agent: reviewer, description: review the change, prompt: check the change}}
        - {tool: subagent, args: {agent: planner, description: plan the work, prompt: plan the next step}}
        - {tool: subagent, args: {agent: outside, description: ask the acp helper, prompt: what is the capital of France}}
    - text: "all three answered: {{tool_results}}"
- when: {prompt: "^check"}
  reply: [{text: the change looks right}]
`,
  )
  write('planner.yml', '- reply: [{text: first write the test}]\n')
  write('child.yml', '- reply: [{text: Paris}]\n')
  // The ACP child is the built dsh itself, serving over stdio on its own scripted model.
  // The planner is a project's file on a script: this config allows that, and the user
  // trusts it (below), as a project's dsh.yml must be to be used.
  write(
    'dsh.yml',
    `- id: agent-definitions
  name: "@dsh/agent-definitions"
  config: { projectScriptedModels: true }
- id: subagent-acp
  name: "@dsh/subagent-acp"
  config:
    providerName: acp
    command: ${JSON.stringify(process.execPath)}
    args: [${JSON.stringify(dshBin)}, acp, --model, "scripted:${join(project, 'child.yml')}"]
`,
  )
  // The ACP child, started in the same directory with the same DSH_HOME, finds it trusted too.
  const trusted = await dsh(['trust'])
  expect(trusted.code, trusted.stderr).toBe(0)
}

const dsh = (args: string[]) => runDsh(args, { cwd: project, env: { DSH_HOME: home } })

interface FirstRequest {
  model: string
  system: string
  tools: { name: string }[]
  prompt: string
}

/** The first model request of the session recorded as `lineage` (`root.call_1`, …). */
function firstRequest(dir: string, lineage: string): FirstRequest {
  const [header, call] = readFileSync(join(dir, `${lineage}.jsonl`), 'utf8').split('\n').filter((line) => line !== '').map((line) => JSON.parse(line) as Record<string, unknown>)
  const request = call!.request as { model: string; system: string; tools: { name: string }[] }
  return { model: request.model, system: request.system, tools: request.tools, prompt: header!.prompt as string }
}

describe('agents defined in files, through the CLI', () => {
  it('a parent delegates to three helpers by name; each child runs with exactly its tools, model and persona, and the tree names each helper', async () => {
    await setUpProject()
    const run = await dsh(['run', '--session-dir', 'sessions', '--record', 'rec', '--model', 'scripted:parent.yml', 'go'])
    expect(run.stderr).not.toMatch(/error/i)
    expect(run.code).toBe(0)
    expect(run.stdout).toBe('all three answered: the change looks right\nfirst write the test\nParis\n')

    const rec = join(project, 'rec')
    const parent = firstRequest(rec, 'root')
    const tool = parent.tools.find((candidate) => candidate.name === 'subagent') as unknown as { name: string; description: string; parameters: { properties: { agent: { enum: string[] } } } }
    // The plain child stays beside the helpers, as general.
    expect(tool.parameters.properties.agent.enum).toEqual(['general', 'outside', 'planner', 'reviewer'])
    expect(tool.description).toContain('- reviewer: Reviews a change for bugs; give it the change.')
    expect(JSON.stringify(tool)).not.toMatch(/"provider"|acp|spawn|fork/)

    const reviewer = firstRequest(rec, 'root.call_1')
    expect(reviewer.system.startsWith('You are the reviewer persona.')).toBe(true)
    expect(reviewer.tools.map((candidate) => candidate.name).sort()).toEqual(['task_list', 'task_output'])
    expect(reviewer.model).toBe('parent.yml')

    const planner = firstRequest(rec, 'root.call_2')
    expect(planner.system.startsWith('You are the planner persona.')).toBe(true)
    expect(planner.model).toBe('planner.yml')
    expect(planner.tools.map((candidate) => candidate.name)).toContain('bash')

    // ACP takes no persona: the instructions head the task the dsh acp child receives.
    const outside = firstRequest(rec, 'root.call_3')
    expect(outside.prompt).toBe('You are the acp helper persona.\n\n---\n\nwhat is the capital of France')
    expect(outside.model).toBe(join(project, 'child.yml'))

    const tree = await dsh(['sessions', 'tree', '--session-dir', 'sessions'])
    expect(tree.code).toBe(0)
    const lines = tree.stdout.trim().split('\n')
    expect(lines).toHaveLength(4)
    expect(lines[1]).toMatch(/reviewer \(spawn\) "review the change"  completed$/)
    expect(lines[2]).toMatch(/planner \(fork\) "plan the work"  completed \(seeded \d+ events\)$/)
    expect(lines[3]).toMatch(/outside \(acp\) "ask the acp helper"  completed$/)
    // Piped, each child's start line names its helper after the words scripts parse.
    expect(run.stderr).toMatch(/\[subagent\] start spawn \S+ "review the change" \[helper reviewer\]/)
    // --json: each child's start record names its helper.
    const json = await dsh(['run', '--json', '--session-dir', 'sessions-json', '--model', 'scripted:parent.yml', 'go'])
    expect(json.code).toBe(0)
    const starts = json.stdout.trim().split('\n').map((line) => JSON.parse(line) as { kind: string; provider?: string; helper?: string }).filter((record) => record.kind === 'subagent/start')
    expect(starts.map((record) => [record.provider, record.helper]).sort()).toEqual([['acp', 'outside'], ['fork', 'planner'], ['spawn', 'reviewer']])
    const headers = readdirSync(join(project, 'sessions'))
      .filter((name) => name.endsWith('.jsonl'))
      .map((name) => (JSON.parse(readFileSync(join(project, 'sessions', name), 'utf8').split('\n')[0]!) as { header: { helper?: { name: string; hash: string } } }).header)
    expect(headers.flatMap((header) => (header.helper ? [header.helper.name] : [])).sort()).toEqual(['planner', 'reviewer'])
  })

  it("dsh agents list names each helper, its provider, model and file, and the user's own helper is used over a project's of the same name, with a warning naming both", async () => {
    await setUpProject()
    mkdirSync(join(home, 'agents'), { recursive: true })
    writeFileSync(join(home, 'agents', 'reviewer.md'), REVIEWER.replace('reviewer persona', 'other persona'))
    const listed = await dsh(['agents', 'list'])
    const warning = `${join(agentsDir(), 'reviewer.md')}: "reviewer" is also defined by your own ${join(home, 'agents', 'reviewer.md')}, which is used: a project's file does not replace your helper (rename one of them to have both)`
    expect(listed.stderr).toBe(`[warn] agent-definitions: ${warning}\n`)
    expect(listed.code).toBe(0)
    const [head, ...rows] = listed.stdout.trim().split('\n')
    expect(head).toMatch(/^NAME\s+PROVIDER\s+MODEL\s+FILE$/)
    expect(rows).toEqual([
      expect.stringMatching(new RegExp(`^outside\\s+acp\\s+\\(parent's\\)\\s+${join(agentsDir(), 'outside.md')}$`)),
      expect.stringMatching(new RegExp(`^planner\\s+fork\\s+scripted:planner.yml\\s+${join(agentsDir(), 'planner.md')}$`)),
      expect.stringMatching(new RegExp(`^reviewer\\s+spawn\\s+\\(parent's\\)\\s+${join(home, 'agents', 'reviewer.md')}$`)),
      warning,
    ])
    const shown = await dsh(['agents', 'show', 'reviewer'])
    expect(shown.code).toBe(0)
    expect(shown.stdout).toContain('tools: task_output, task_list\n')
    expect(shown.stdout).toContain('===\nYou are the other persona.\n')
    const missing = await dsh(['agents', 'show', 'reviewr'])
    expect(missing.code).toBe(2)
    expect(missing.stderr.trim().split('\n').at(-1)).toBe('dsh agents show: no helper named "reviewr" (helpers: outside, planner, reviewer)')
  })

  it.each([
    ['an unknown tool name', 'reviewer.md', REVIEWER.replace('task_output]', 'task_ouput]'), (file: string) => `dsh: ${file}:4: helper "reviewer": unknown tool "task_ouput" in tools`],
    ['a tool list on a provider that cannot enforce one', 'outside.md', OUTSIDE.replace('provider: acp', 'provider: acp\ntools: [bash]'), (file: string) => `dsh: ${file}:5: helper "outside": provider "acp" cannot enforce a tool list`],
    ['an unknown provider', 'planner.md', PLANNER.replace('provider: fork', 'provider: frok'), (file: string) => `dsh: ${file}:4: helper "planner": no subagent provider named "frok" is registered`],
    ['a model that cannot be resolved', 'planner.md', PLANNER.replace('scripted:planner.yml', 'scripted:plannr.yml'), (file: string) => `dsh: ${file}:5: helper "planner": model "scripted:plannr.yml": `],
    ['an unknown field', 'planner.md', PLANNER.replace('model:', 'modle:'), (file: string) => `dsh: plugin "agent-definitions" (@dsh/agent-definitions) failed to start: ${file}:5: unknown field "modle"`],
  ])('%s is one line naming file and line, exit 2, from config check and run, before any session exists', async (_what, name, text, expected) => {
    await setUpProject()
    const file = write(`.dsh/agents/${name}`, text)
    for (const args of [['config', 'check'], ['run', '--session-dir', 'sessions', '--model', 'scripted:parent.yml', 'go']]) {
      const result = await dsh(args)
      expect(result.code).toBe(2)
      const lines = result.stderr.trim().split('\n')
      expect(lines).toHaveLength(1)
      // The definitions plugin is an entry of the project's dsh.yml, which the line names first.
      expect(lines[0]!.startsWith(expected(file).replace(/^dsh: /, `dsh: config ${join(project, 'dsh.yml')}: `)), lines[0]).toBe(true)
      expect(result.stderr).not.toMatch(/\n\s+at /)
    }
    // The store may have made its directory; no session was written to it.
    const sessions = join(project, 'sessions')
    expect(existsSync(sessions) ? readdirSync(sessions).filter((name) => name.endsWith('.jsonl')) : []).toEqual([])
  })

  it('directories named in config (relative to the config file) and Claude Code files on request load, with a note per unmapped field and tool', async () => {
    write('conf/team/writer.md', '---\nname: writer\ndescription: Writes tests.\n---\nWrite tests.\n')
    const claude = write('.claude/agents/rev.md', '---\nname: code-reviewer\ndescription: Reviews code.\ntools: WebFetch, Bash\ncolor: blue\n---\nReview.\n')
    write('conf/dsh.yml', '- id: agent-definitions\n  name: "@dsh/agent-definitions"\n  config: { claudeCode: true, dirs: [team] }\n')
    const listed = await dsh(['agents', 'list', '--config', 'conf/dsh.yml'])
    expect(listed.code, listed.stderr).toBe(0)
    const lines = listed.stdout.trim().split('\n')
    expect(lines.slice(1, 3)).toEqual([
      expect.stringMatching(new RegExp(`^code-reviewer\\s+spawn\\s+\\(parent's\\)\\s+${claude}$`)),
      expect.stringMatching(new RegExp(`^writer\\s+spawn\\s+\\(parent's\\)\\s+${join(project, 'conf', 'team', 'writer.md')}$`)),
    ])
    expect(lines.slice(3)).toEqual([`${claude}:4: note: Claude Code tool "WebFetch" has no dsh counterpart; left out of tools`, `${claude}:5: note: Claude Code field "color" is not used by dsh`])
    const shown = await dsh(['agents', 'show', 'code-reviewer', '--config', 'conf/dsh.yml'])
    expect(shown.stdout).toContain('tools: bash\n')
  })

  it("a Claude Code agent file with tools: Read, Grep, Glob loads without a note, and dsh agents show gives its child dsh's read, grep and glob", async () => {
    const claude = write('.claude/agents/reviewer.md', '---\nname: reviewer\ndescription: Reviews code.\ntools: Read, Grep, Glob\n---\nReview.\n')
    write('claude.yml', '- id: agent-definitions\n  name: "@dsh/agent-definitions"\n  config: { claudeCode: true }\n')
    const listed = await dsh(['agents', 'list', '--config', 'claude.yml'])
    expect(listed.stderr).toBe('')
    expect(listed.code).toBe(0)
    expect(listed.stdout.trim().split('\n')).toEqual([expect.stringMatching(/^NAME\s+PROVIDER\s+MODEL\s+FILE$/), expect.stringMatching(new RegExp(`^reviewer\\s+spawn\\s+\\(parent's\\)\\s+${claude}$`))])
    const shown = await dsh(['agents', 'show', 'reviewer', '--config', 'claude.yml'])
    expect(shown.code, shown.stderr).toBe(0)
    const tools = /\ntools: (.*)\n/.exec(shown.stdout)![1]!.split(', ')
    expect(tools.sort()).toEqual(['glob', 'grep', 'read'])
  })

  it('with helpers defined the parent can still start a plain child as general, and with helpersOnly: true it cannot', async () => {
    write('.dsh/agents/reviewer.md', REVIEWER)
    write('parent.yml', '- when: {depth: 0}\n  reply:\n    - call: {tool: subagent, args: {agent: general, description: count files, prompt: count the files}}\n    - text: "child said: {{tool_results}}"\n- reply: [{text: three files}]\n')
    const run = await dsh(['run', '--session-dir', 'sessions', '--record', 'rec', '--model', 'scripted:parent.yml', 'go'])
    expect(run.code, run.stderr).toBe(0)
    expect(run.stdout).toBe('child said: three files\n')
    const child = firstRequest(join(project, 'rec'), 'root.call_1')
    expect(child.prompt).toBe('count the files')
    // A plain child: every tool, the subagent tool itself with general and the helpers.
    expect(child.tools.map((tool) => tool.name)).toEqual(expect.arrayContaining(['bash', 'subagent']))

    write('only.yml', '- id: tool-subagent\n  name: "@dsh/tool-subagent"\n  config: { helpersOnly: true }\n')
    const only = await dsh(['run', '--config', 'only.yml', '--session-dir', 'sessions-only', '--record', 'rec-only', '--model', 'scripted:parent.yml', 'go'])
    expect(only.code, only.stderr).toBe(0)
    const parent = firstRequest(join(project, 'rec-only'), 'root')
    const tool = parent.tools.find((candidate) => candidate.name === 'subagent') as unknown as { parameters: { properties: { agent: { enum: string[] } } } }
    expect(tool.parameters.properties.agent.enum).toEqual(['reviewer'])
    expect(readdirSync(join(project, 'rec-only')).filter((name) => name.startsWith('root.call'))).toEqual([])
  })

  it('an agents directory without definitions leaves the plain subagent tool, and loads nothing of them', async () => {
    mkdirSync(agentsDir(), { recursive: true })
    write('.dsh/agents/notes.txt', 'not a definition')
    const result = await dsh(['config', 'check'])
    expect(result.code).toBe(0)
    expect(result.stdout).toMatch(/tool-subagent +@dsh\/tool-subagent +\{"provider":"spawn"\}/)
    expect(result.stdout).not.toContain('agent-definitions')
  })

  it('two files with one name in one directory are refused, naming both', async () => {
    await setUpProject()
    write('.dsh/agents/reviewer-copy.md', REVIEWER)
    const result = await dsh(['config', 'check'])
    expect(result.code).toBe(2)
    expect(result.stderr.trim()).toBe(
      `dsh: config ${join(project, 'dsh.yml')}: plugin "agent-definitions" (@dsh/agent-definitions) failed to start: ${join(agentsDir(), 'reviewer.md')}:2: "reviewer" is also defined by ${join(agentsDir(), 'reviewer-copy.md')}; one directory defines each name once`,
    )
  })
})
