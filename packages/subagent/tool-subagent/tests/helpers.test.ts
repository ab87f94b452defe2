import { mkdirSync, mkdtempSync, rmSync, writeFileSync } from 'node:fs'
import { tmpdir } from 'node:os'
import { join } from 'node:path'
import { afterEach, beforeEach, describe, expect, it } from 'vitest'
import { createDelegationHarness, type DelegationHarness } from '@dsh/testkit/delegation'
import type { HarnessOptions } from '@dsh/testkit/harness'
import { textOf } from '@dsh/llm'
import { ScriptedPlugin } from '@dsh/llm-scripted'
import { AgentDefinitionsService } from '@dsh/agent-definitions'
import { SpawnPlugin } from '@dsh/subagent-spawn'
import { ForkPlugin } from '@dsh/subagent-fork'
import { NO_CAPABILITIES, type SubagentProvider, type SubagentRequest } from '@dsh/subagent'
import { SubagentToolPlugin, withTimeout } from '@dsh/tool-subagent'
import { TaskToolsPlugin } from '@dsh/tool-tasks'

let root: string
let harness: DelegationHarness | undefined
beforeEach(() => {
  root = mkdtempSync(join(tmpdir(), 'dsh-helpers-'))
})
afterEach(async () => {
  await harness?.dispose()
  harness = undefined
  rmSync(root, { recursive: true, force: true })
})

function define(name: string, front: string, body: string): void {
  const dir = join(root, '.dsh', 'agents')
  mkdirSync(dir, { recursive: true })
  writeFileSync(join(dir, `${name}.md`), `---\nname: ${name}\n${front}\n---\n${body}\n`)
}

/** A remote-like provider: no capabilities, answers at once, keeps each request. */
function remote(requests: SubagentRequest[]): SubagentProvider {
  return {
    name: 'remote',
    capabilities: NO_CAPABILITIES,
    inheritsParentContext: false,
    start: async (request) => {
      requests.push(request)
      return { id: 'remote:1', local: false, result: Promise.resolve({ output: [{ type: 'text', text: 'remote answer' }], stopReason: 'completed' }), cancel: () => {}, dispose: async () => {} }
    },
  }
}

async function setup(script: HarnessOptions['script'], other: HarnessOptions['script'] = [{ reply: [{ text: 'unused' }] }]): Promise<DelegationHarness> {
  harness = await createDelegationHarness({ script, plugins: [[TaskToolsPlugin, {}], [SpawnPlugin, {}], [ForkPlugin, {}], [ScriptedPlugin, { name: 'other', scripts: { plan: other } }]] })
  await harness.plugin(AgentDefinitionsService, { cwd: root, home: join(root, 'home') })
  return harness
}

const schemaOf = (h: DelegationHarness) => h.ctx.tools.get('subagent')!.parameters as { properties: Record<string, { enum?: string[] }>; required: string[] }

describe('the helper tool over agent definitions', () => {
  it('offers one tool naming every helper, worded from its definitions and providers, and nothing about providers', async () => {
    define('reviewer', 'description: Reviews a change for bugs.\ntools: [task_list]\nbackground: never', 'You review.')
    define('planner', 'description: Plans the work.\nprovider: fork\nmodel: other:plan', 'You plan.')
    const h = await setup([{ reply: [{ text: 'x' }] }])
    await h.plugin(SubagentToolPlugin, { helpers: true })
    const tool = h.ctx.tools.get('subagent')!
    expect(tool.description).toBe(
      [
        'Delegate a task to one of the helpers below: set agent to its name. Each helper is its own agent with its own instructions, tools and model; it does not see this conversation, so give it a complete brief, and it returns its final answer (unless tagged otherwise).',
        'Helpers:',
        '- general: A general-purpose agent with your tools and model and no instructions of its own: for a task none of the other helpers fits.',
        '- planner: Plans the work. [sees this conversation]',
        '- reviewer: Reviews a change for bugs. [waits]',
        '[sees this conversation]: it already sees this conversation up to the call; tell it only what is new and what to return.',
        '[waits]: it always waits for its answer, whatever run_in_background says.',
        'Set run_in_background to keep working while a helper runs; collect its answer later with task_output.',
      ].join('\n'),
    )
    const schema = schemaOf(h)
    expect(Object.keys(schema.properties)).toEqual(['agent', 'description', 'prompt', 'run_in_background'])
    expect(schema.properties.agent!.enum).toEqual(['general', 'planner', 'reviewer'])
    expect(JSON.stringify(schema)).not.toMatch(/provider|spawn|fork/)
    // Byte-stable: a provider event that changes nothing leaves the rendering as it was.
    const before = JSON.stringify({ description: tool.description, parameters: tool.parameters })
    const extra = await h.ctx.plugin(SpawnPlugin, { providerName: 'spare' })
    await extra.dispose()
    const after = h.ctx.tools.get('subagent')!
    expect(JSON.stringify({ description: after.description, parameters: after.parameters })).toBe(before)
  })

  it('grows with each helper by its line alone: name, description and its tags', async () => {
    define('a', 'description: First helper.', 'x')
    const h = await setup([{ reply: [{ text: 'x' }] }])
    await h.plugin(SubagentToolPlugin, { helpers: true })
    const one = h.ctx.tools.get('subagent')!.description
    await h.dispose()
    harness = undefined
    define('b', 'description: Second helper.', 'x')
    const h2 = await setup([{ reply: [{ text: 'x' }] }])
    await h2.plugin(SubagentToolPlugin, { helpers: true })
    const two = h2.ctx.tools.get('subagent')!.description
    expect(two.length - one.length).toBe('\n- b: Second helper.'.length)
  })

  it('runs the chosen helper with its tools, model and instructions, and records it in the child header and the result', async () => {
    define('reviewer', 'description: Reviews.\ntools: [task_list]', 'You are the reviewer persona.')
    define('planner', 'description: Plans.\nprovider: fork\nmodel: other:plan', 'You are the planner persona.')
    const h = await setup(
      [
        { when: { prompt: '^check' }, reply: [{ text: 'looks fine' }] },
        { reply: [{ calls: [{ tool: 'subagent', args: { agent: 'reviewer', description: 'review', prompt: 'check the diff' } }, { tool: 'subagent', args: { agent: 'planner', description: 'plan', prompt: 'plan it' } }] }, { text: 'done' }] },
      ],
      [{ reply: [{ text: 'the plan' }] }],
    )
    await h.plugin(SubagentToolPlugin, { helpers: true })
    // The planner's model is another adapter's: record its requests beside the scripted one's.
    const other = h.ctx.llm.getAdapter('other')!
    const stream = other.stream.bind(other)
    other.stream = (request) => (h.requests.push(request), stream(request))
    const parent = await h.agent()
    expect((await parent.followup('go')).reason).toBe('completed')
    const reviewer = h.requests.find((request) => request.system.includes('reviewer persona'))!
    expect(reviewer.model).toBe('test')
    expect(reviewer.tools.map((tool) => tool.name)).toEqual(['task_list'])
    const planner = h.requests.find((request) => request.system.includes('planner persona'))!
    expect(planner.model).toBe('plan')
    expect(planner.tools.map((tool) => tool.name)).toContain('subagent')
    const results = parent.session.ownEvents().flatMap((event) => (event.type === 'tool/result' ? [event] : []))
    expect(results.map((event) => textOf(event.result.content)).sort()).toEqual(['looks fine', 'the plan'])
    const records = results.map((event) => (event.record as { delegation: { helper: string; childId: string } }).delegation)
    expect(records.map((record) => record.helper).sort()).toEqual(['planner', 'reviewer'])
    const stored = await h.ctx.sessions.listStored()
    const helpers = stored.flatMap((header) => (header.helper ? [header.helper.name] : [])).sort()
    expect(helpers).toEqual(['planner', 'reviewer'])
    expect(stored.find((header) => header.helper?.name === 'reviewer')!.helper!.hash).toMatch(/^[0-9a-f]{16}$/)
  })

  it('puts the instructions at the head of the task for a provider that cannot take a persona', async () => {
    define('outside', 'description: Runs elsewhere.\nprovider: remote', 'Be terse.')
    const requests: SubagentRequest[] = []
    const h = await setup([{ reply: [{ call: { tool: 'subagent', args: { agent: 'outside', description: 'ask', prompt: 'what is 2+2' } } }, { text: 'ok' }] }])
    h.ctx.subagents.registerProvider(remote(requests))
    await h.plugin(SubagentToolPlugin, { helpers: true })
    const parent = await h.agent()
    await parent.followup('go')
    expect(requests).toHaveLength(1)
    expect(requests[0]!.persona).toBeUndefined()
    expect(requests[0]!.toolFilter).toBeUndefined()
    expect(textOf(requests[0]!.prompt)).toBe('Be terse.\n\n---\n\nwhat is 2+2')
  })

  it('does not offer a helper its provider cannot run, nor one whose provider is missing', async () => {
    define('filtered', 'description: F.\nprovider: remote\ntools: [bash]', 'x')
    define('ghost', 'description: G.\nprovider: nowhere', 'x')
    define('fine', 'description: Fine.', 'x')
    const h = await setup([{ reply: [{ text: 'x' }] }])
    h.ctx.subagents.registerProvider(remote([]))
    await h.plugin(SubagentToolPlugin, { helpers: true, helpersOnly: true })
    expect(schemaOf(h).properties.agent!.enum).toEqual(['fine'])
  })

  it("keeps the general child beside the helpers: agent general starts a plain child on the tool's provider with the tool's persona and tool filter, naming no helper", async () => {
    define('reviewer', 'description: Reviews.\ntools: [task_list]', 'You are the reviewer persona.')
    const h = await setup([
      { when: { prompt: '^count' }, reply: [{ text: 'three' }] },
      { reply: [{ call: { tool: 'subagent', args: { agent: 'general', description: 'count', prompt: 'count the files' } } }, { text: 'done' }] },
    ])
    await h.plugin(SubagentToolPlugin, { helpers: true, persona: 'You are the plain child persona.', toolFilter: { allow: ['task_output'] } })
    expect(schemaOf(h).properties.agent!.enum).toEqual(['general', 'reviewer'])
    const parent = await h.agent()
    expect((await parent.followup('go')).reason).toBe('completed')
    const child = h.requests.find((request) => request.system.includes('plain child persona'))!
    expect(child.tools.map((tool) => tool.name)).toEqual(['task_output'])
    const results = parent.session.ownEvents().flatMap((event) => (event.type === 'tool/result' ? [event] : []))
    expect(results.map((event) => textOf(event.result.content))).toEqual(['three'])
    const stored = await h.ctx.sessions.listStored()
    const children = stored.filter((header) => header.parentSession === parent.id)
    expect(children.map((header) => [header.provider, header.helper])).toEqual([['spawn', undefined]])
  })

  it('offers the helpers alone with helpersOnly: true, and a call naming general is refused', async () => {
    define('reviewer', 'description: Reviews.', 'You review.')
    const h = await setup([{ reply: [{ call: { tool: 'subagent', args: { agent: 'general', description: 'count', prompt: 'count the files' } } }, { text: 'done' }] }])
    await h.plugin(SubagentToolPlugin, { helpers: true, helpersOnly: true })
    expect(schemaOf(h).properties.agent!.enum).toEqual(['reviewer'])
    expect(h.ctx.tools.get('subagent')!.description).not.toContain('general')
    const parent = await h.agent()
    await parent.followup('go')
    const results = parent.session.ownEvents().flatMap((event) => (event.type === 'tool/result' ? [event] : []))
    // Refused by the tool's own schema: general is not among the values.
    expect(results.map((event) => textOf(event.result.content))).toEqual([expect.stringMatching(/^invalid arguments for subagent: \/agent /)])
    expect((await h.ctx.sessions.listStored()).filter((header) => header.parentSession === parent.id)).toEqual([])
  })

  it('a definition named general is the team\'s and takes the place of the built-in one', async () => {
    define('general', 'description: Our own general helper.', 'You are our general persona.')
    const h = await setup([{ reply: [{ text: 'x' }] }])
    await h.plugin(SubagentToolPlugin, { helpers: true })
    expect(schemaOf(h).properties.agent!.enum).toEqual(['general'])
    expect(h.ctx.tools.get('subagent')!.description).toContain('- general: Our own general helper.')
  })

  it('a helper set to always run in the background returns a task id', async () => {
    define('bg', 'description: Background.\nbackground: always', 'x')
    const h = await setup([
      { when: { prompt: '^slow' }, reply: [{ text: 'slow answer' }] },
      { reply: [{ call: { tool: 'subagent', args: { agent: 'bg', description: 'slow', prompt: 'slow work' } } }, { text: 'started' }, { text: 'got it' }] },
    ])
    await h.plugin(SubagentToolPlugin, { helpers: true })
    const parent = await h.agent()
    await parent.followup('go')
    const first = parent.session.ownEvents().find((event) => event.type === 'tool/result')
    expect(first?.type === 'tool/result' && textOf(first.result.content)).toMatch(/^started background subagent task subagent-1/)
  })

  it('a timeout stops the run and says so', async () => {
    let cancelled: unknown
    let settle!: (value: { output: []; stopReason: 'aborted' }) => void
    const run = withTimeout(
      { id: 'x', local: false, result: new Promise((resolve) => (settle = resolve)), cancel: (reason) => ((cancelled = reason), settle({ output: [], stopReason: 'aborted' })), dispose: async () => {} },
      5,
    )
    const result = await run.result
    expect(String(cancelled)).toContain('timeoutMs (5)')
    expect(result).toMatchObject({ stopReason: 'error', diagnostic: 'it ran longer than its timeoutMs (5 ms) and was stopped' })
  })
})

describe('a continuable helper resumed after its file changed', () => {
  it('says so when the child is brought back, and not when it is first started', async () => {
    const { Logger } = await import('cordis')
    define('keeper', 'description: Kept.\ncontinuable: true', 'Version one.')
    const script: HarnessOptions['script'] = [
      { when: { prompt: '^remember' }, reply: [{ text: 'remembered' }, { text: 'again' }] },
      { reply: [{ call: { tool: 'subagent', args: { agent: 'keeper', description: 'keep', prompt: 'remember this' } } }, { text: 'started' }, { text: 'noted' }, { text: 'noted again' }] },
    ]
    const lines: string[] = []
    const listen = (h: DelegationHarness) => {
      const exporter = { colors: 0 as const, levels: { default: 3 }, export: (message: Parameters<typeof Logger.format>[1]) => void lines.push(Logger.format(exporter, message)) }
      h.ctx.logger.exporter(exporter)
    }
    let h = await setup(script)
    listen(h)
    await h.plugin(SubagentToolPlugin, { helpers: true })
    const starts: { helper?: string; continuable?: true }[] = []
    h.ctx.on('subagent/start', (info) => void starts.push(info))
    const parent = await h.agent()
    await parent.followup('go')
    const result = parent.session.ownEvents().find((event) => event.type === 'tool/result')
    const childId = /subagent (\S+)\./.exec(result?.type === 'tool/result' ? textOf(result.result.content) : '')![1]!
    await h.ctx.subagents.continuation.whenSettled(parent.id)
    await parent.whenIdle()
    expect(lines.join('\n')).not.toContain('earlier version')
    // Each turn of the kept child names its helper on the live events.
    expect(starts).toEqual([expect.objectContaining({ helper: 'keeper', continuable: true })])
    const parentId = parent.id

    define('keeper', 'description: Kept.\ncontinuable: true', 'Version two.')
    h = harness = await h.restart()
    listen(h)
    await h.plugin(AgentDefinitionsService, { cwd: root, home: join(root, 'home') })
    await h.plugin(SubagentToolPlugin, { helpers: true })
    const resumed = await h.ctx.agents.create({ sessionId: parentId })
    await h.ctx.subagents.followup(resumed, childId, 'and again')
    expect(lines.join('\n')).toContain(`subagent ${childId} was started as helper "keeper" from an earlier version of ${join(root, '.dsh', 'agents', 'keeper.md')} (it has changed since)`)
  })
})

describe('a helper called by an agent whose own tools are filtered', () => {
  it('gives its child none of the tools the caller was denied', async () => {
    define('general', 'description: Anything.', 'You are general.')
    const h = await setup([
      { when: { prompt: '^inner' }, reply: [{ text: 'inner done' }] },
      { reply: [{ call: { tool: 'subagent', args: { agent: 'general', description: 'inner', prompt: 'inner work' } } }, { text: 'ok' }] },
    ])
    h.ctx.tools.register({ name: 'danger', description: 'a tool the caller may not use', parameters: { type: 'object' }, execute: async () => 'boom' })
    await h.plugin(SubagentToolPlugin, { helpers: true })
    const caller = await h.ctx.agents.create({ setup: (ctx, agent) => void ctx.tools.restrict(agent.id, { deny: ['danger'] }) })
    await caller.followup('go')
    const child = h.requests.find((request) => request.system.includes('You are general.'))!
    const names = child.tools.map((tool) => tool.name)
    expect(names).toContain('subagent')
    expect(names).not.toContain('danger')
    // An unfiltered caller's child gets it.
    const free = await h.agent()
    h.requests.length = 0
    await free.followup('go')
    expect(h.requests.find((request) => request.system.includes('You are general.'))!.tools.map((tool) => tool.name)).toContain('danger')
  })
})

describe("the tool's own toolFilter", () => {
  it("is the ceiling of every helper: one listing a tool it denies, or one it does not allow, runs without it, and the start says so", async () => {
    define('tester', 'description: Runs the tests.\ntools: [task_list, task_output]', 'You are the tester.')
    define('lister', 'description: Lists.\ntools: [task_list]\ndisallowedTools: [task_output]', 'You are the lister.')
    define('open', 'description: Anything.', 'You are open.')
    const calls = (agent: string) => ({ call: { tool: 'subagent', args: { agent, description: agent, prompt: `work as ${agent}` } } })
    const h = await setup([
      { when: { depth: 1 }, reply: [{ text: 'done' }] },
      { reply: [calls('tester'), calls('lister'), calls('open'), { text: 'ok' }] },
    ])
    const lines: string[] = []
    const { Logger } = await import('cordis')
    const exporter = { colors: 0 as const, levels: { default: 2 }, export: (message: Parameters<typeof Logger.format>[1]) => void lines.push(Logger.format(exporter, message)) }
    h.ctx.logger.exporter(exporter)
    await h.plugin(SubagentToolPlugin, { helpers: true, toolFilter: { deny: ['task_list'] } })
    await (await h.agent()).followup('go')
    const toolsOf = (persona: string) => h.requests.find((request) => request.system.includes(persona))!.tools.map((tool) => tool.name)
    expect(toolsOf('You are the tester.')).toEqual(['task_output'])
    expect(toolsOf('You are the lister.')).toEqual([])
    expect(toolsOf('You are open.')).not.toContain('task_list')
    expect(toolsOf('You are open.')).toContain('task_output')
    const file = (name: string) => join(root, '.dsh', 'agents', `${name}.md`)
    const warning = (name: string) =>
      `${file(name)}:4: helper "${name}" lists "task_list" in tools, which the toolFilter of tool "subagent" does not allow, and runs without it; a helper's tools narrow the tool's toolFilter and never widen it: to give it, change toolFilter in the config of the tool (@dsh/tool-subagent)`
    expect(lines.filter((line) => line.includes('does not allow')).map((line) => line.replace(/^\S+ tool-subagent /, ''))).toEqual([warning('lister'), warning('tester')])
  })

  it("refuses a helper whose provider cannot hold its child under it: the call fails saying what to change, and nothing starts", async () => {
    define('outside', 'description: Runs elsewhere.\nprovider: remote', 'Be terse.')
    const requests: SubagentRequest[] = []
    const h = await setup([{ reply: [{ call: { tool: 'subagent', args: { agent: 'outside', description: 'ask', prompt: 'what is 2+2' } } }, { text: 'ok' }] }])
    h.ctx.subagents.registerProvider(remote(requests))
    await h.plugin(SubagentToolPlugin, { helpers: true, toolFilter: { deny: ['task_list'] } })
    const parent = await h.agent()
    await parent.followup('go')
    expect(requests).toEqual([])
    const result = parent.session.ownEvents().find((event) => event.type === 'tool/result')
    expect(result?.type === 'tool/result' && result.result.isError).toBe(true)
    expect(result?.type === 'tool/result' && textOf(result.result.content)).toBe(
      'the helper "outside" could not be started: its provider "remote" cannot limit its child\'s tools, and tool "subagent" has a toolFilter that limits every helper it offers; run the helper on spawn or fork, or remove toolFilter from the config of the tool (@dsh/tool-subagent)',
    )
  })

  it("keeps an allow list a ceiling too: a helper naming none gets the tool's list, one naming others gets what both allow", async () => {
    define('tester', 'description: Runs the tests.\ntools: [task_list, task_output]', 'You are the tester.')
    define('open', 'description: Anything.', 'You are open.')
    const calls = (agent: string) => ({ call: { tool: 'subagent', args: { agent, description: agent, prompt: `work as ${agent}` } } })
    const h = await setup([
      { when: { depth: 1 }, reply: [{ text: 'done' }] },
      { reply: [calls('tester'), calls('open'), { text: 'ok' }] },
    ])
    await h.plugin(SubagentToolPlugin, { helpers: true, toolFilter: { allow: ['task_output', 'task_kill'] } })
    await (await h.agent()).followup('go')
    const toolsOf = (persona: string) => h.requests.find((request) => request.system.includes(persona))!.tools.map((tool) => tool.name).sort()
    expect(toolsOf('You are the tester.')).toEqual(['task_output'])
    expect(toolsOf('You are open.')).toEqual(['task_kill', 'task_output'])
  })
})

describe('a helper with a budget', () => {
  it('is stopped when it and its children reach its maxOutputTokens, and its parent reads an error naming the budget and the spend', async () => {
    define('thrifty', 'description: Works in small steps.\nmaxOutputTokens: 30', 'Be brief.')
    const step = { text: 'one more small step of the work', call: { tool: 'task_list', args: {} } }
    const h = await setup([
      { when: { depth: 1 }, reply: [step, step, step, step, step, step, { text: 'finished' }] },
      { reply: [{ call: { tool: 'subagent', args: { agent: 'thrifty', description: 'work', prompt: 'do the work' } } }, { text: 'done' }] },
    ])
    await h.plugin(SubagentToolPlugin, { helpers: true })
    const parent = await h.agent()
    await parent.followup('go')
    const result = parent.session.events().find((event) => event.type === 'tool/result')
    expect(result?.type === 'tool/result' && result.result.isError).toBe(true)
    expect(result?.type === 'tool/result' && textOf(result.result.content)).toMatch(/^the subagent ended budget: this child's output-token budget of 30 is spent \((3\d|4\d) output tokens used by it and its children\); it was stopped/)
  })
})


describe("a helper's depth bound", () => {
  /** Every agent calls the helper again, so the tree grows until a bound refuses it. */
  const recurse: HarnessOptions['script'] = [
    { when: { depth: 3 }, reply: [{ text: 'too deep' }] },
    { reply: [{ call: { tool: 'subagent', args: { agent: 'deep', description: 'deeper', prompt: 'go deeper' } } }, { text: 'answer: {{last_tool_result}}' }] },
  ]

  it("is the tighter of the definition's maxDepth and the tool's: a helper set deeper runs under the tool's, and the log says where to raise it", async () => {
    define('deep', 'description: Delegates again.\nmaxDepth: 50', 'Go deeper.')
    const lines: string[] = []
    const h = await setup(recurse)
    const { Logger } = await import('cordis')
    const exporter = { colors: 0 as const, levels: { default: 2 }, export: (message: Parameters<typeof Logger.format>[1]) => void lines.push(Logger.format(exporter, message)) }
    h.ctx.logger.exporter(exporter)
    await h.plugin(SubagentToolPlugin, { helpers: true, maxDepth: 1 })
    const parent = await h.agent()
    await parent.followup('go')
    const stored = await h.ctx.sessions.listStored()
    const children = stored.filter((header) => header.helper?.name === 'deep')
    expect(children.map((header) => [header.delegationDepth, header.maxDepth])).toEqual([[1, 1]])
    const refused = children[0] && (await h.ctx.sessions.readStored(children[0].id))?.events.find((event) => event.type === 'tool/result')
    expect(refused?.type === 'tool/result' && textOf(refused.result.content)).toMatch(/delegation depth limit reached: a child of \S+ would be at depth 2, above maxDepth 1/)
    expect(lines.filter((line) => line.includes('helper "deep" sets maxDepth 50, above the bound 1 of tool "subagent", and runs under 1; to let it go deeper, raise maxDepth in the config of the tool'))).toHaveLength(1)
  })

  it("is the definition's where it is the tighter", async () => {
    define('deep', 'description: Delegates again.\nmaxDepth: 1', 'Go deeper.')
    const h = await setup(recurse)
    await h.plugin(SubagentToolPlugin, { helpers: true, maxDepth: 5 })
    await (await h.agent()).followup('go')
    const children = (await h.ctx.sessions.listStored()).filter((header) => header.helper?.name === 'deep')
    expect(children.map((header) => [header.delegationDepth, header.maxDepth])).toEqual([[1, 1]])
  })
})
