import { afterEach, describe, expect, it } from 'vitest'
import { Logger, type Context, type Exporter } from 'cordis'
import { createHarness, type Harness, type HarnessOptions } from '@dsh/testkit/harness'
import { textOf } from '@dsh/llm'
import type { ToolDefinition } from '@dsh/tools'
import { NO_CAPABILITIES, SubagentService, type SubagentProvider, type SubagentResult } from '@dsh/subagent'
import { SpawnPlugin } from '@dsh/subagent-spawn'
import { ForkPlugin } from '@dsh/subagent-fork'
import { SubagentToolPlugin, subagentToolMountProblem } from '@dsh/tool-subagent'

let harness: Harness
afterEach(async () => {
  await harness?.dispose()
})

async function setup(script?: HarnessOptions['script']) {
  harness = await createHarness({ script })
  await harness.plugin(SubagentService)
}

const settle = () => new Promise((resolve) => setTimeout(resolve, 0))
const schemaOf = (definition: ToolDefinition | undefined) => definition?.parameters as { properties: Record<string, unknown>; required: string[] }
const toolResults = (events: ReturnType<Harness['ctx']['sessions']['create']>['events'] extends () => infer E ? E : never) =>
  events.flatMap((event) => (event.type === 'tool/result' ? [{ text: textOf(event.result.content), isError: event.result.isError === true }] : []))

/** A provider without depth limits that answers at once, recording each request's maxDepth. */
function remoteProvider(requests: unknown[]): SubagentProvider {
  return {
    name: 'remote',
    capabilities: NO_CAPABILITIES,
    inheritsParentContext: false,
    start: async (request) => {
      requests.push(request.maxDepth)
      return { id: 'r', local: false, result: Promise.resolve({ output: [{ type: 'text', text: 'remote answer' }], stopReason: 'completed' }), cancel: () => {}, dispose: async () => {} }
    },
  }
}

describe('the subagent tool: registration', () => {
  it('shows the model only description, prompt and run_in_background', async () => {
    await setup()
    await harness.plugin(SpawnPlugin, {})
    await harness.plugin(SubagentToolPlugin, { provider: 'spawn' })
    const schema = schemaOf(harness.ctx.tools.get('subagent'))
    expect(Object.keys(schema.properties)).toEqual(['description', 'prompt', 'run_in_background'])
    expect(schema.required).toEqual(['description', 'prompt'])
  })

  it('leaves run_in_background out of the schema when background runs are disabled', async () => {
    await setup()
    await harness.plugin(SpawnPlugin, {})
    await harness.plugin(SubagentToolPlugin, { provider: 'spawn', enableRunInBackground: false })
    expect(Object.keys(schemaOf(harness.ctx.tools.get('subagent')).properties)).toEqual(['description', 'prompt'])
  })

  it('appears only after its provider registers when loaded first, and disappears when the provider unloads', async () => {
    await setup()
    await harness.plugin(SubagentToolPlugin, { provider: 'spawn' })
    expect(harness.ctx.tools.list()).not.toContain('subagent')
    const provider = await harness.ctx.plugin(SpawnPlugin, {})
    await settle()
    expect(harness.ctx.tools.list()).toContain('subagent')
    await provider.dispose()
    expect(harness.ctx.tools.list()).not.toContain('subagent')
    await harness.ctx.plugin(SpawnPlugin, {})
    expect(harness.ctx.tools.list()).toContain('subagent')
  })

  it('words its description from the provider: standalone for fresh children, "only what is new" for fork', async () => {
    await setup()
    await harness.plugin(SpawnPlugin, {})
    await harness.plugin(ForkPlugin, {})
    await harness.plugin(SubagentToolPlugin, { provider: 'spawn' })
    await harness.plugin(SubagentToolPlugin, { provider: 'fork', toolName: 'subagent_fork' })
    expect(harness.ctx.tools.get('subagent')!.description).toContain('does not see this conversation')
    const fork = harness.ctx.tools.get('subagent_fork')!
    expect(fork.description).toContain('already sees this conversation up to')
    expect(fork.description).toContain('only what is new')
  })

  it('re-derives its wording when the provider is replaced by one with another context contract', async () => {
    await setup()
    const fresh = await harness.ctx.plugin(SpawnPlugin, { providerName: 'worker' })
    await harness.plugin(SubagentToolPlugin, { provider: 'worker' })
    expect(harness.ctx.tools.get('subagent')!.description).toContain('does not see this conversation')
    await fresh.dispose()
    await harness.ctx.plugin(ForkPlugin, { providerName: 'worker' })
    expect(harness.ctx.tools.get('subagent')!.description).toContain('already sees this conversation up to')
  })

  it('two instances bound to spawn and fork coexist under different tool names', async () => {
    await setup()
    await harness.plugin(SpawnPlugin, {})
    await harness.plugin(ForkPlugin, {})
    await harness.plugin(SubagentToolPlugin, { provider: 'spawn' })
    await harness.plugin(SubagentToolPlugin, { provider: 'fork', toolName: 'subagent_fork' })
    expect(harness.ctx.tools.list()).toEqual(expect.arrayContaining(['subagent', 'subagent_fork']))
  })

  it('a second instance with the same tool name fails loudly', async () => {
    await setup()
    await harness.plugin(SpawnPlugin, {})
    await harness.plugin(ForkPlugin, {})
    await harness.plugin(SubagentToolPlugin, { provider: 'spawn' })
    await expect(harness.plugin(SubagentToolPlugin, { provider: 'fork' })).rejects.toThrow(/"subagent" is already registered/)
  })

  it('a second instance with the same tool name fails at load even when its provider registers later', async () => {
    await setup()
    await harness.plugin(SubagentToolPlugin, { provider: 'later' })
    await expect(harness.plugin(SubagentToolPlugin, { provider: 'spawn' })).rejects.toThrow(/"subagent" is already registered or reserved/)
    await harness.plugin(SpawnPlugin, { providerName: 'later' })
    expect(harness.ctx.tools.list()).toEqual(['subagent'])
  })

  it('an explicit empty allow list gives children no tools; an absent filter gives them all', async () => {
    await setup([
      { when: { depth: 1 }, reply: [{ call: { tool: 'probe', args: {} } }, { text: 'child saw: {{last_tool_result}}' }] },
      { when: { depth: 0 }, reply: [{ call: { tool: 'locked', args: { description: 'd', prompt: 'p' } } }, { call: { tool: 'open', args: { description: 'd', prompt: 'p' } } }, { text: 'done' }] },
    ])
    harness.ctx.tools.register({ name: 'probe', description: 'p', parameters: { type: 'object' }, execute: () => 'probe ran' })
    await harness.plugin(SpawnPlugin, {})
    await harness.plugin(SubagentToolPlugin, { provider: 'spawn', toolName: 'locked', toolFilter: { allow: [] } })
    await harness.plugin(SubagentToolPlugin, { provider: 'spawn', toolName: 'open' })
    const parent = await harness.agent()
    await parent.followup('go')
    const [locked, open] = toolResults(parent.session.events())
    expect(locked.text).toContain('child saw: unknown tool "probe" (available: none)')
    expect(open.text).toBe('child saw: probe ran')
  })

  it('a provider name that never registers is a tool that never appears, and a log line says so', async () => {
    await setup()
    const lines: string[] = []
    const exporter: Exporter = { colors: 0, levels: { default: 3 }, export: (message) => lines.push(Logger.format(exporter, message)) }
    harness.ctx.logger.exporter(exporter)
    await harness.plugin(SpawnPlugin, {})
    await harness.plugin(SubagentToolPlugin, { provider: 'spwan' })
    expect(harness.ctx.tools.list()).not.toContain('subagent')
    expect(lines.join('\n')).toMatch(/waits for subagent provider "spwan"/)
  })

  it('rejects a config without a provider, naming the key', async () => {
    await setup()
    await expect(harness.plugin(SubagentToolPlugin, {})).rejects.toThrow(/provider/)
  })

  it('rejects toolFilter with neither allow nor deny instead of allowing everything', async () => {
    await setup()
    await harness.plugin(SpawnPlugin, {})
    await expect(harness.plugin(SubagentToolPlugin, { provider: 'spawn', toolFilter: {} })).rejects.toThrow(/toolFilter needs `allow` or `deny`/)
    expect(() => SubagentToolPlugin.Config({ provider: 'spawn', toolFilter: {} })).toThrow(/toolFilter needs/)
    expect(SubagentToolPlugin.Config({ provider: 'spawn', toolFilter: { deny: ['bash'] } }).toolFilter).toEqual({ deny: ['bash'] })
  })
})

describe('the subagent tool: foreground delegation', () => {
  const parentAndChildren: HarnessOptions['script'] = [
    { when: { prompt: 'inspect alpha' }, reply: [{ text: 'alpha is fine' }] },
    { when: { prompt: 'inspect beta' }, reply: [{ text: 'beta is broken' }] },
    {
      when: { depth: 0 },
      reply: [
        { calls: [
          { tool: 'subagent', args: { description: 'check alpha', prompt: 'inspect alpha' } },
          { tool: 'subagent', args: { description: 'check beta', prompt: 'inspect beta' } },
        ] },
        { text: 'summary: {{last_tool_result}}' },
      ],
    },
  ]

  it('returns the child\'s answer as the tool result; the parent log holds only the call and the result', async () => {
    await setup(parentAndChildren)
    await harness.plugin(SpawnPlugin, {})
    await harness.plugin(SubagentToolPlugin, { provider: 'spawn' })
    const parent = await harness.agent()
    const turn = await parent.followup('check both')
    expect(turn.reason).toBe('completed')
    expect(toolResults(parent.session.events())).toEqual([
      { text: 'alpha is fine', isError: false },
      { text: 'beta is broken', isError: false },
    ])
    const types = parent.session.events().map((event) => event.type)
    expect(types.filter((type) => type === 'tool/call')).toHaveLength(2)
    expect(types.filter((type) => type === 'assistant/message')).toHaveLength(2)
    expect(harness.ctx.agents.list()).toEqual([parent])
    expect(harness.ctx.sessions.list()).toEqual([parent.session])
  })

  it('runs the delegations of one assistant message in parallel', async () => {
    await setup([
      { when: { prompt: 'inspect alpha' }, reply: [{ text: 'alpha', delay_ms: 150 }] },
      { when: { prompt: 'inspect beta' }, reply: [{ text: 'beta', delay_ms: 150 }] },
      parentAndChildren![2],
    ])
    await harness.plugin(SpawnPlugin, {})
    await harness.plugin(SubagentToolPlugin, { provider: 'spawn' })
    const live: number[] = []
    harness.ctx.on('subagent/start', () => live.push(harness.ctx.agents.list().length - 1))
    const parent = await harness.agent()
    await parent.followup('go')
    expect(Math.max(...live)).toBe(2)
  })

  it('a non-completed child is an error result naming the reason, with the diagnostic and partial output', async () => {
    await setup()
    let resolve!: (result: SubagentResult) => void
    let disposed = 0
    const provider: SubagentProvider = {
      name: 'flaky',
      capabilities: { ...NO_CAPABILITIES, depthLimit: true },
      inheritsParentContext: false,
      start: async () => ({
        id: 'flaky-1',
        local: false,
        result: new Promise<SubagentResult>((r) => (resolve = r)),
        cancel: () => {},
        dispose: async () => { disposed++ },
      }),
    }
    await harness.ctx.plugin({ inject: ['subagents'], apply: (ctx: Context) => { ctx.subagents.registerProvider(provider) } })
    await harness.plugin(SubagentToolPlugin, { provider: 'flaky' })
    const definition = harness.ctx.tools.get('subagent')!
    const parent = await harness.agent()
    const pending = definition.execute({ description: 'd', prompt: 'p' }, { signal: new AbortController().signal, callId: 'c', agent: parent })
    await settle()
    resolve({ output: [{ type: 'text', text: 'half done' }], stopReason: 'max-tokens', diagnostic: 'ran out of tokens' })
    const output = await pending
    expect(output).toEqual({
      isError: true,
      content: 'the subagent ended max-tokens: ran out of tokens\npartial output:\nhalf done',
      // Not for the model: what the parent's session records of the child.
      record: { delegation: { childId: 'flaky-1', provider: 'flaky', local: false } },
    })
    expect(disposed).toBe(1)
  })

  it('disposes the run even when its result rejects, and reports both a result and a disposal failure', async () => {
    await setup()
    const provider: SubagentProvider = {
      name: 'broken',
      capabilities: { ...NO_CAPABILITIES, depthLimit: true },
      inheritsParentContext: false,
      start: async () => ({
        id: 'b',
        local: false,
        result: Promise.reject(new Error('transport lost')),
        cancel: () => {},
        dispose: async () => { throw new Error('could not reap') },
      }),
    }
    await harness.ctx.plugin({ inject: ['subagents'], apply: (ctx: Context) => { ctx.subagents.registerProvider(provider) } })
    await harness.plugin(SubagentToolPlugin, { provider: 'broken' })
    const parent = await harness.agent()
    const output = await harness.ctx.tools.get('subagent')!.execute({ description: 'd', prompt: 'p' }, { signal: new AbortController().signal, callId: 'c', agent: parent })
    expect(output).toMatchObject({ isError: true })
    const text = (output as { content: string }).content
    expect(text).toContain('transport lost')
    expect(text).toContain('could not reap')
  })

  it('the tool call\'s abort signal cancels the child: the parent turn ends aborted and the child is gone', async () => {
    await setup([
      { when: { depth: 1 }, reply: [{ text: 'slow child', delay_ms: 60_000 }] },
      { when: { depth: 0 }, reply: [{ call: { tool: 'subagent', args: { description: 'slow', prompt: 'take your time' } } }, { text: 'never' }] },
    ])
    await harness.plugin(SpawnPlugin, {})
    await harness.plugin(SubagentToolPlugin, { provider: 'spawn' })
    const parent = await harness.agent()
    const started = new Promise<void>((resolve) => harness.ctx.on('subagent/start', () => resolve()))
    const ended = new Promise<string>((resolve) => harness.ctx.on('subagent/end', (info) => resolve(info.stopReason)))
    const turn = parent.followup('delegate')
    await started
    parent.cancel()
    expect((await turn).reason).toBe('aborted')
    expect(await ended).toBe('aborted')
    const [result] = toolResults(parent.session.events())
    expect(result.isError).toBe(true)
    expect(result.text).toContain('the subagent ended aborted')
    expect(harness.ctx.agents.list()).toEqual([parent])
  })

  it('the default depth bound is sent only to providers that support it', async () => {
    await setup()
    const requests: unknown[] = []
    await harness.ctx.plugin({ inject: ['subagents'], apply: (ctx: Context) => { ctx.subagents.registerProvider(remoteProvider(requests)) } })
    await harness.plugin(SubagentToolPlugin, { provider: 'remote' })
    const parent = await harness.agent()
    const exec = { signal: new AbortController().signal, callId: 'c', agent: parent }
    expect(await harness.ctx.tools.get('subagent')!.execute({ description: 'd', prompt: 'p' }, exec)).toMatchObject({ content: 'remote answer' })
    expect(requests).toEqual([undefined])
  })

  it('an explicit maxDepth on a provider that cannot enforce depth fails when the tool mounts, naming the tool and the provider', async () => {
    await setup()
    await harness.ctx.plugin({ inject: ['subagents'], apply: (ctx: Context) => { ctx.subagents.registerProvider(remoteProvider([])) } })
    await expect(harness.plugin(SubagentToolPlugin, { provider: 'remote', toolName: 'bounded', maxDepth: 2 })).rejects.toMatchObject({
      name: 'SubagentToolError',
      code: 'DEPTH_UNSUPPORTED',
      message: expect.stringMatching(/tool "bounded" sets maxDepth 2, but subagent provider "remote" cannot enforce a depth limit/),
    })
    expect(harness.ctx.tools.list()).not.toContain('bounded')
  })

  it('a provider that registers later and cannot enforce the explicit maxDepth leaves the tool absent, and the mount check names the tool and the provider for the host to fail on', async () => {
    await setup()
    const config = { provider: 'remote', toolName: 'bounded', maxDepth: 2 }
    await harness.plugin(SubagentToolPlugin, config)
    await harness.ctx.plugin({ inject: ['subagents'], apply: (ctx: Context) => { ctx.subagents.registerProvider(remoteProvider([])) } })
    expect(harness.ctx.tools.list()).not.toContain('bounded')
    expect(subagentToolMountProblem(config, harness.ctx.subagents.getProvider('remote'))).toEqual({
      code: 'DEPTH_UNSUPPORTED',
      message: expect.stringMatching(/tool "bounded" sets maxDepth 2, but subagent provider "remote" cannot enforce a depth limit/),
    })
  })

  it('the mount check names a provider nobody registered, with the registered ones', () => {
    expect(subagentToolMountProblem({ provider: 'sapwn', toolName: 'subagent', backgroundMode: 'one-shot' }, undefined, ['spawn', 'fork'])).toEqual({
      code: 'NO_PROVIDER',
      message: 'tool "subagent" is bound to subagent provider "sapwn", which is not registered (registered: spawn, fork)',
    })
  })

  it('maxDepth from config bounds recursion: with maxDepth 1 a child\'s own delegation is refused', async () => {
    await setup([
      { when: { depth: 1 }, reply: [{ call: { tool: 'subagent', args: { description: 'deeper', prompt: 'go deeper' } } }, { text: 'child saw: {{last_tool_result}}' }] },
      { when: { depth: 0 }, reply: [{ call: { tool: 'subagent', args: { description: 'first', prompt: 'delegate again' } } }, { text: 'root saw: {{last_tool_result}}' }] },
    ])
    await harness.plugin(SpawnPlugin, {})
    await harness.plugin(SubagentToolPlugin, { provider: 'spawn', maxDepth: 1 })
    const parent = await harness.agent()
    await parent.followup('start')
    const [result] = toolResults(parent.session.events())
    expect(result.text).toMatch(/child saw: the subagent could not be started: delegation depth limit reached: .* depth 2, above maxDepth 1/)
  })
})
