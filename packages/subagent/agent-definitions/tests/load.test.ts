import { mkdirSync, mkdtempSync, rmSync, symlinkSync, writeFileSync } from 'node:fs'
import { tmpdir } from 'node:os'
import { join } from 'node:path'
import { afterEach, beforeEach, describe, expect, it } from 'vitest'
import { Context } from 'cordis'
import { AgentDefinitionsService, DefinitionError, definitionProblems, loadDefinitions, MAX_DEFINITION_BYTES, type CompositionFacts } from '../src/index.js'

let root: string
let cwd: string
let home: string

beforeEach(() => {
  root = mkdtempSync(join(tmpdir(), 'dsh-defs-'))
  cwd = join(root, 'project')
  home = join(root, 'home')
  mkdirSync(cwd)
  mkdirSync(home)
})
afterEach(() => rmSync(root, { recursive: true, force: true }))

function write(dir: string, name: string, text: string): string {
  mkdirSync(dir, { recursive: true })
  const file = join(dir, name)
  writeFileSync(file, text)
  return file
}
const projectDir = () => join(cwd, '.dsh', 'agents')
const userDir = () => join(home, 'agents')
const load = (more: Parameters<typeof loadDefinitions>[0] = {}) => loadDefinitions({ cwd, home, ...more })

function refusal(run: () => unknown): DefinitionError {
  try {
    run()
  } catch (error) {
    expect(error).toBeInstanceOf(DefinitionError)
    const refused = error as DefinitionError
    // One line, no stack in the message.
    expect(refused.message).not.toMatch(/\n/)
    return refused
  }
  throw new Error('expected a DefinitionError')
}

const reviewer = `---
name: reviewer
description: Reviews a change
  for bugs.
tools: [task_list, task_output]
maxDepth: 1
background: never
timeoutMs: 60000
---
You are a careful reviewer.
`

describe('loading definitions', () => {
  it('reads every field of a dsh definition, the body as its instructions', () => {
    const file = write(projectDir(), 'reviewer.md', reviewer)
    const { definitions, notes } = load()
    expect(notes).toEqual([])
    expect(definitions).toHaveLength(1)
    const [definition] = definitions
    expect(definition).toMatchObject({
      name: 'reviewer',
      description: 'Reviews a change for bugs.',
      provider: 'spawn',
      tools: ['task_list', 'task_output'],
      maxDepth: 1,
      background: 'never',
      continuable: false,
      timeoutMs: 60000,
      instructions: 'You are a careful reviewer.',
    })
    expect(definition!.source).toMatchObject({ file, origin: 'project', flavour: 'dsh', lines: { name: 2, description: 3, tools: 5, maxDepth: 6 } })
    expect(definition!.source.hash).toMatch(/^[0-9a-f]{16}$/)
  })

  it("has the user's own helper win over a cloned project's of the same name (which would drop the user's rules), with a warning naming both files", () => {
    const cloned = write(projectDir(), 'r.md', reviewer.replace('careful', 'sloppy'))
    const own = write(userDir(), 'reviewer.md', `${reviewer.replace('---\nYou', 'permissions:\n  deny: [bash]\n---\nYou')}`)
    write(userDir(), 'planner.md', '---\nname: planner\ndescription: Plans.\n---\nPlan.\n')
    const { definitions, notes, warnings } = load()
    expect(definitions.map((definition) => [definition.name, definition.source.file])).toEqual([
      ['reviewer', own],
      ['planner', join(userDir(), 'planner.md')],
    ])
    const warning = `${cloned}: "reviewer" is also defined by your own ${own}, which is used: a project's file does not replace your helper (rename one of them to have both)`
    expect(warnings).toEqual([warning])
    expect(notes).toEqual([warning])
  })

  it('has the first directory win a name clash between two of the user\'s own directories, with a note naming both files', () => {
    const team = write(join(home, 'team'), 'reviewer.md', reviewer)
    const theirs = write(userDir(), 'reviewer.md', reviewer.replace('careful', 'sloppy'))
    const { definitions, notes } = load({ dirs: [join(home, 'team')] })
    expect(definitions.map((definition) => [definition.name, definition.source.file])).toEqual([['reviewer', team]])
    expect(notes).toEqual([`${theirs}: note: "reviewer" is shadowed by ${team} (config definitions win)`])
  })

  it('reads directories named in config, relative to the project, and refuses one that does not exist', () => {
    write(join(cwd, 'team'), 'a.md', '---\nname: a\ndescription: A.\n---\n')
    expect(load({ dirs: ['team'] }).definitions.map((definition) => definition.source.origin)).toEqual(['project'])
    const refused = refusal(() => load({ dirs: ['nowhere'] }))
    expect(refused.code).toBe('MISSING_DIR')
    expect(refused.message).toContain(join(cwd, 'nowhere'))
  })

  it('names the file and line of an unknown field', () => {
    const file = write(projectDir(), 'r.md', '---\nname: r\ndescription: R.\ncolour: red\n---\n')
    const refused = refusal(() => load())
    expect(refused.code).toBe('UNKNOWN_FIELD')
    expect(refused.message).toMatch(new RegExp(`^${file}:4: unknown field "colour"`))
  })

  it('refuses malformed front matter with the line of the mistake', () => {
    const file = write(projectDir(), 'r.md', '---\nname: r\ndescription: [unclosed\n---\nbody\n')
    const refused = refusal(() => load())
    expect(refused.code).toBe('SYNTAX')
    expect(refused.message).toMatch(new RegExp(`^${file}:\\d+: front matter is not valid YAML`))
    write(projectDir(), 'r.md', 'no front matter here\n')
    expect(refusal(() => load()).message).toContain('starts with YAML front matter')
    write(projectDir(), 'r.md', '---\nname: r\n')
    expect(refusal(() => load()).message).toContain('never closed')
  })

  it('refuses a name with path characters', () => {
    write(projectDir(), 'r.md', '---\nname: ../etc/passwd\ndescription: R.\n---\n')
    const refused = refusal(() => load())
    expect(refused.code).toBe('BAD_NAME')
    expect(refused.message).toContain('path characters')
  })

  it('refuses two files of one directory with one name, naming both, and registers nothing', () => {
    const first = write(projectDir(), 'a.md', reviewer)
    const second = write(projectDir(), 'b.md', reviewer)
    const refused = refusal(() => load())
    expect(refused.code).toBe('DUPLICATE_NAME')
    expect(refused.message).toContain(first)
    expect(refused.message).toContain(second)
  })

  it('refuses a file over the size limit without reading it whole', () => {
    const file = join(projectDir(), 'big.md')
    mkdirSync(projectDir(), { recursive: true })
    writeFileSync(file, `---\nname: big\ndescription: Big.\n---\n${'x'.repeat(10 * 1024 * 1024)}`)
    const refused = refusal(() => load())
    expect(refused.code).toBe('TOO_LARGE')
    expect(refused.message).toContain(file)
    expect(MAX_DEFINITION_BYTES).toBeLessThan(10 * 1024 * 1024)
  })

  it('names a symlink loop in the agents directory', () => {
    mkdirSync(projectDir(), { recursive: true })
    const loop = join(projectDir(), 'loop.md')
    symlinkSync(loop, loop)
    const refused = refusal(() => load())
    expect(refused.code).toBe('UNREADABLE')
    expect(refused.message).toBe(`${loop}: cannot read the definition: a symlink loop`)
  })

  it('names an agents directory that is itself a symlink loop', () => {
    mkdirSync(join(cwd, '.dsh'), { recursive: true })
    symlinkSync(projectDir(), projectDir())
    const refused = refusal(() => load())
    expect(refused.code).toBe('UNREADABLE')
    expect(refused.message).toBe(`${projectDir()}: cannot read the agents directory: a symlink loop`)
  })

  it('refuses values of the wrong kind, naming the field', () => {
    write(projectDir(), 'r.md', '---\nname: r\ndescription: R.\nbackground: sometimes\n---\n')
    expect(refusal(() => load()).message).toMatch(/r\.md:4: background must be one of allowed, always, never$/)
    write(projectDir(), 'r.md', '---\nname: r\ndescription: R.\nmaxDepth: -1\n---\n')
    expect(refusal(() => load()).message).toMatch(/r\.md:4: maxDepth must be a whole number/)
    write(projectDir(), 'r.md', '---\nname: r\n---\n')
    expect(refusal(() => load()).message).toMatch(/needs a description/)
    write(projectDir(), 'r.md', '---\nname: r\ndescription: R.\nmaxOutputTokens: 0\n---\n')
    expect(refusal(() => load()).message).toMatch(/r\.md:4: maxOutputTokens must be a whole number of at least 1$/)
    write(projectDir(), 'r.md', '---\nname: r\ndescription: R.\nmaxInputTokens: 1e15\n---\n')
    expect(refusal(() => load()).message).toMatch(/r\.md:4: maxInputTokens must be at most 10\^12$/)
  })

  it('reads a budget: maxOutputTokens and maxInputTokens', () => {
    write(projectDir(), 'r.md', '---\nname: r\ndescription: R.\nmaxOutputTokens: 5000\nmaxInputTokens: 200000\n---\n')
    expect(load().definitions[0]).toMatchObject({ budget: { outputTokens: 5000, inputTokens: 200000 } })
  })

  it('reads permission rules as a level named after the helper, and refuses rules that are not rules, naming the line', () => {
    write(userDir(), 'r.md', '---\nname: r\ndescription: R.\npermissions:\n  allow: ["bash(npm test*)"]\n  deny: [bash]\n---\n')
    expect(load().definitions[0]?.permissions).toEqual({ from: 'helper r', allow: ['bash(npm test*)'], deny: ['bash'] })
    write(projectDir(), 'r.md', '---\nname: r\ndescription: R.\npermissions:\n  allow: ["bash(npm test"]\n---\n')
    expect(refusal(() => load()).message).toMatch(/r\.md:4: permissions\.allow\[0\]: "bash\(npm test" is not a rule/)
    write(projectDir(), 'r.md', '---\nname: r\ndescription: R.\npermissions:\n  allowed: [bash]\n---\n')
    expect(refusal(() => load()).message).toMatch(/r\.md:4: permissions has an unknown key "allowed" \(allow, ask, deny, askUp\)/)
    write(projectDir(), 'r.md', '---\nname: r\ndescription: R.\npermissions: [bash]\n---\n')
    expect(refusal(() => load()).message).toMatch(/r\.md:4: permissions must be a mapping/)
  })

  it("applies a project definition's ask and deny but not its allow, with a warning saying what to change; the user's own files keep theirs", () => {
    const text = '---\nname: r\ndescription: R.\npermissions:\n  allow: [bash]\n  deny: ["bash(rm *)"]\n---\n'
    const file = write(projectDir(), 'r.md', text)
    const project = load()
    expect(project.definitions[0]?.permissions).toEqual({ from: 'helper r', deny: ['bash(rm *)'] })
    const warning = `${file}:4: helper "r": permissions.allow is not applied, since a project's definition may narrow what your own config allows and never widen it; to have "bash" run unasked, add it to allow in the approvals entry of your own config, or move the file to ~/.dsh/agents`
    expect(project.warnings).toEqual([warning])
    expect(project.notes).toEqual([warning])
    // Only an allow is dropped: a level of deny alone is left whole, and says nothing.
    write(projectDir(), 'r.md', '---\nname: r\ndescription: R.\npermissions: { ask: [bash] }\n---\n')
    expect(load()).toMatchObject({ definitions: [{ permissions: { from: 'helper r', ask: ['bash'] } }], warnings: [] })
    // An allow alone leaves no level at all.
    write(projectDir(), 'r.md', '---\nname: r\ndescription: R.\npermissions: { allow: ["bash(a*)", "bash(b*)"] }\n---\n')
    const allowOnly = load()
    expect(allowOnly.definitions[0]?.permissions).toBeUndefined()
    expect(allowOnly.warnings[0]).toContain('to have its 2 allow rules run unasked, add them to allow')
    rmSync(file)

    write(userDir(), 'r.md', text)
    expect(load()).toMatchObject({ definitions: [{ permissions: { from: 'helper r', allow: ['bash'], deny: ['bash(rm *)'] } }], warnings: [] })
    // Started in the home directory, ./.dsh/agents is the user's own directory.
    const own = loadDefinitions({ cwd: root, home: join(root, '.dsh') })
    expect(own.definitions).toEqual([])
    write(join(root, '.dsh', 'agents'), 'r.md', text)
    expect(loadDefinitions({ cwd: root, home: join(root, '.dsh') })).toMatchObject({ definitions: [{ permissions: { allow: ['bash'] }, source: { origin: 'user' } }], warnings: [] })
  })

  it("treats a directory config names inside the project as the project's, whoever's config named it; one outside it, or in dsh's home, is the user's", () => {
    const text = '---\nname: r\ndescription: R.\npermissions:\n  allow: [bash]\n---\n'
    const origin = (dirs: string[]) => {
      const { definitions, warnings } = load({ dirs })
      return { origin: definitions[0]?.source.origin, allow: definitions[0]?.permissions?.allow, warned: warnings.length }
    }
    // ./team, however spelled (relative, absolute, through ..): its allow is dropped with a warning.
    write(join(cwd, 'team'), 'r.md', text)
    const dropped = { origin: 'project', allow: undefined, warned: 1 }
    expect(origin(['team'])).toEqual(dropped)
    expect(origin([join(cwd, 'team')])).toEqual(dropped)
    expect(origin(['../project/./team'])).toEqual(dropped)
    // A link out of the project is the project's; a link from elsewhere into it too.
    const outside = join(root, 'mine')
    write(outside, 'r.md', text)
    symlinkSync(outside, join(cwd, 'linked'))
    expect(origin(['linked'])).toEqual(dropped)
    symlinkSync(join(cwd, 'team'), join(root, 'into-project'))
    expect(origin([join(root, 'into-project')])).toEqual(dropped)
    // Outside the project (the user's config names it by absolute path): the user's, allow kept.
    const kept = { origin: 'config', allow: ['bash'], warned: 0 }
    expect(origin([outside])).toEqual(kept)
    // In dsh's home, even when the project holds dsh's home (started in the home directory).
    write(join(home, 'team'), 'r.md', text)
    expect(origin([join(home, 'team')])).toEqual(kept)
    expect(loadDefinitions({ cwd: root, home, user: false, project: false, dirs: [join(home, 'team')] }).definitions[0]?.source.origin).toBe('config')
    expect(loadDefinitions({ cwd: root, home, user: false, project: false, dirs: ['mine'] }).definitions[0]?.source.origin).toBe('project')
  })

  it("refuses the scripted model of a definition in a project directory named by config unless projectScriptedModels is set", () => {
    write(join(cwd, 'team'), 'author.md', '---\nname: author\ndescription: A.\nmodel: scripted:author.yml\n---\n')
    const { definitions } = load({ dirs: ['team'] })
    const facts = { provider: () => ({ lacks: () => undefined, continuable: true, modelsHere: true }), providers: ['spawn'], tools: [], modelProblem: () => undefined, approvals: true }
    expect(definitionProblems(definitions, facts)).toEqual([expect.stringContaining('plays back files, and a project\'s definition may not choose one')])
    expect(definitionProblems(definitions, { ...facts, projectScriptedModels: true })).toEqual([])
  })

  it("says a project definition's warnings at the service's start, and serves them", async () => {
    write(projectDir(), 'r.md', '---\nname: r\ndescription: R.\npermissions: { allow: [bash] }\n---\n')
    const ctx = new Context()
    const said: string[] = []
    ctx.logger.exporter({ colors: 0, levels: { default: 2 }, export: (message) => void said.push(`${message.type} ${message.name}: ${String(message.args.join(' '))}`) } as Parameters<typeof ctx.logger.exporter>[0])
    await ctx.plugin(AgentDefinitionsService, { cwd, home })
    expect(ctx.agentDefinitions.warnings).toHaveLength(1)
    expect(said.filter((line) => line.includes('permissions.allow is not applied'))).toHaveLength(1)
  })

  it('loads Claude Code agent files on request, with a note per unmapped field and tool', () => {
    const claude = join(cwd, '.claude', 'agents')
    const file = write(claude, 'rev.md', '---\nname: code-reviewer\ndescription: Reviews code.\ntools: Read, WebFetch, Bash\nmodel: sonnet\ncolor: blue\n---\nReview it.\n')
    expect(load().definitions).toEqual([])
    const { definitions, notes } = load({ claudeCode: true })
    expect(definitions).toHaveLength(1)
    expect(definitions[0]).toMatchObject({ name: 'code-reviewer', provider: 'spawn', tools: ['read', 'bash'], instructions: 'Review it.' })
    expect(definitions[0]!.model).toBeUndefined()
    expect(notes).toEqual([
      `${file}:4: note: Claude Code tool "WebFetch" has no dsh counterpart; left out of tools`,
      `${file}:5: note: Claude Code model "sonnet" is not a dsh model spec; the helper runs on the parent's model`,
      `${file}:6: note: Claude Code field "color" is not used by dsh`,
    ])
  })

  it("loads a Claude Code reviewer with tools: Read, Grep, Glob without a note, on dsh's file tools", () => {
    const file = write(join(cwd, '.claude', 'agents'), 'reviewer.md', '---\nname: reviewer\ndescription: Reviews code.\ntools: Read, Grep, Glob\n---\nReview it.\n')
    const { definitions, notes, warnings } = load({ claudeCode: true })
    expect(notes).toEqual([])
    expect(warnings).toEqual([])
    expect(definitions.map((definition) => [definition.source.file, definition.tools])).toEqual([[file, ['read', 'grep', 'glob']]])
  })

  it("maps every Claude Code file tool to dsh's, Edit and MultiEdit both to edit, in either list", () => {
    write(join(cwd, '.claude', 'agents'), 'writer.md', '---\nname: writer\ndescription: Writes.\ntools: [Read, Write, Edit, MultiEdit, Glob, Grep, LS, Bash]\ndisallowedTools: MultiEdit, Bash\n---\n')
    const { definitions, notes } = load({ claudeCode: true })
    expect(notes).toEqual([])
    expect(definitions[0]).toMatchObject({ tools: ['read', 'write', 'edit', 'glob', 'grep', 'ls', 'bash'], disallowedTools: ['edit', 'bash'] })
  })

  it('fails the service start on a bad file, so nothing is registered', async () => {
    write(projectDir(), 'good.md', reviewer)
    write(projectDir(), 'bad.md', '---\nname: bad\ndescription: B.\nprovidr: spawn\n---\n')
    const ctx = new Context()
    await expect(ctx.plugin(AgentDefinitionsService, { cwd, home })).rejects.toThrow(/bad\.md:4: unknown field "providr"/)
    expect(ctx.get('agentDefinitions')).toBeUndefined()
  })

  it('serves the definitions and notes it loaded', async () => {
    write(projectDir(), 'reviewer.md', reviewer)
    const ctx = new Context()
    await ctx.plugin(AgentDefinitionsService, { cwd, home })
    expect(ctx.agentDefinitions.list().map((definition) => definition.name)).toEqual(['reviewer'])
    expect(ctx.agentDefinitions.get('reviewer')?.instructions).toBe('You are a careful reviewer.')
    expect(ctx.agentDefinitions.get('nobody')).toBeUndefined()
  })
})

describe('checking definitions against a composition', () => {
  const facts: CompositionFacts = {
    provider: (name) =>
      name === 'spawn'
        ? { lacks: () => undefined, continuable: true, modelsHere: true }
        : name === 'acp'
          ? { lacks: (features: object) => Object.keys(features)[0], continuable: true, modelsHere: false }
          : undefined,
    providers: ['spawn', 'acp'],
    tools: ['bash', 'task_list'],
    modelProblem: (spec) => (spec.startsWith('scripted:') ? undefined : `no model adapter for "${spec}"`),
    approvals: false,
  }

  it('gives one line per problem, naming file and line of the field', () => {
    const file = write(projectDir(), 'a.md', '---\nname: a\ndescription: A.\nprovider: acpp\n---\n')
    write(projectDir(), 'b.md', '---\nname: b\ndescription: B.\nprovider: acp\ntools: [bash]\n---\n')
    write(projectDir(), 'c.md', '---\nname: c\ndescription: C.\ntools: [bash, reed]\nmodel: nope:x\n---\n')
    write(userDir(), 'd.md', '---\nname: d\ndescription: D.\nmodel: scripted:x.yml\ntools: [bash]\n---\n')
    write(userDir(), 'e.md', '---\nname: e\ndescription: E.\npermissions: { allow: [bash] }\n---\n')
    const problems = definitionProblems(load().definitions, facts)
    expect(problems).toEqual([
      `${file}:4: helper "a": no subagent provider named "acpp" is registered (registered: spawn, acp); load its plugin or fix the name`,
      `${join(projectDir(), 'b.md')}:5: helper "b": provider "acp" cannot enforce a tool list (its child's tools are its own); remove tools or use spawn or fork`,
      `${join(projectDir(), 'c.md')}:4: helper "c": unknown tool "reed" in tools (tools: bash, task_list)`,
      `${join(projectDir(), 'c.md')}:5: helper "c": model "nope:x": no model adapter for "nope:x"`,
      `${join(userDir(), 'e.md')}:4: helper "e": permissions need the approval broker, and this composition has none (- id: approvals, name: "@dsh/approvals"); add it, or remove permissions`,
    ])
    expect(definitionProblems(load().definitions, { ...facts, approvals: true })).toHaveLength(4)
  })

  it('reads skills as a list of skill names and checks them against the skills loaded and the provider', () => {
    const file = write(projectDir(), 's.md', '---\nname: s\ndescription: S.\nskills: release-notes, triage\n---\n')
    write(projectDir(), 'none.md', '---\nname: none\ndescription: N.\nskills: []\n---\n')
    write(projectDir(), 'far.md', '---\nname: far\ndescription: F.\nprovider: acp\nskills: [triage]\n---\n')
    const { definitions } = load()
    expect(definitions.map((definition) => [definition.name, definition.skills])).toEqual([['far', ['triage']], ['none', []], ['s', ['release-notes', 'triage']]])
    expect(definitionProblems(definitions, { ...facts, skills: ['triage'] })).toEqual([
      `${join(projectDir(), 'far.md')}:5: helper "far": provider "acp" makes its child's prompt itself, so skills cannot limit it; remove skills or use spawn or fork`,
      `${file}:4: helper "s": unknown skill "release-notes" in skills (skills: triage)`,
    ])
    expect(definitionProblems([definitions[2]!], facts)).toEqual([`${file}:4: helper "s": skills needs the skills service, and this composition has none (- id: skills, name: "@dsh/skills"); add it, or remove skills`])
    write(projectDir(), 'bad.md', '---\nname: bad\ndescription: B.\nskills: [../x]\n---\n')
    expect(refusal(() => load()).message).toBe(`${join(projectDir(), 'bad.md')}:4: skills must be a list of skill names (skills: [release-notes])`)
  })

  it("refuses a project definition's scripted or replay model unless the user's config allows it; the user's own files may", () => {
    write(projectDir(), 'p.md', '---\nname: p\ndescription: P.\nmodel: scripted:evil.yml\n---\n')
    write(projectDir(), 'q.md', '---\nname: q\ndescription: Q.\nprovider: acp\nmodel: replay:rec\n---\n')
    write(projectDir(), 'real.md', '---\nname: real\ndescription: R.\nmodel: scripted\n---\n')
    write(userDir(), 'mine.md', '---\nname: mine\ndescription: M.\nmodel: scripted:mine.yml\n---\n')
    const refused = (name: string, line: number, spec: string) =>
      `${join(projectDir(), `${name}.md`)}:${line}: helper "${name}": model ${JSON.stringify(spec)} plays back files, and a project's definition may not choose one (the project's author would be the model); to allow it, set projectScriptedModels: true in the agent-definitions entry of your own config (- id: agent-definitions, name: "@dsh/agent-definitions", config: { projectScriptedModels: true }), or move the file to ~/.dsh/agents`
    // Whatever the provider: a queue worker would play the same files.
    expect(definitionProblems(load().definitions, facts)).toEqual([refused('p', 4, 'scripted:evil.yml'), refused('q', 5, 'replay:rec'), refused('real', 4, 'scripted')])
    expect(definitionProblems(load().definitions, { ...facts, modelProblem: () => undefined, projectScriptedModels: true })).toEqual([])
    // The host names its playback adapters (a renamed one too); a model service is not one.
    const renamed: CompositionFacts = { ...facts, modelProblem: () => undefined, playbackModel: (spec) => spec.startsWith('play:') }
    write(projectDir(), 'p.md', '---\nname: p\ndescription: P.\nmodel: play:evil.yml\n---\n')
    write(projectDir(), 'q.md', '---\nname: q\ndescription: Q.\nmodel: deepseek:deepseek-chat\n---\n')
    rmSync(join(projectDir(), 'real.md'))
    expect(definitionProblems(load().definitions, renamed)).toEqual([refused('p', 4, 'play:evil.yml')])
  })
})
