import { describe, expect, it } from 'vitest'
import { Context } from 'cordis'
import { AGENT_SCOPE, ToolRegistry, type ToolDefinition, type ToolAgent } from '@dsh/tools'

const tool = (name: string, extra: Partial<ToolDefinition> = {}): ToolDefinition => ({
  name,
  description: `the ${name} tool`,
  parameters: { type: 'object', properties: {} },
  execute: () => name,
  ...extra,
})

async function registry() {
  const ctx = new Context()
  await ctx.plugin(ToolRegistry)
  return ctx
}

const exec = (agentId: string) => ({ signal: new AbortController().signal, callId: 'c1', agent: { id: agentId } as ToolAgent })

describe('ctx.tools', () => {
  it('rejects a duplicate name and keeps the first', async () => {
    const ctx = await registry()
    ctx.tools.register(tool('read', { description: 'first' }))
    expect(() => ctx.tools.register(tool('read', { description: 'second' }))).toThrow(/already registered/)
    expect(ctx.tools.get('read')?.description).toBe('first')
  })

  it('undoes a registration when the registering plugin is disposed', async () => {
    const ctx = await registry()
    const fiber = await ctx.plugin({ inject: ['tools'], apply: (child: Context) => { child.tools.register(tool('temp')) } })
    expect(ctx.tools.list()).toEqual(['temp'])
    await fiber.dispose()
    expect(ctx.tools.list()).toEqual([])
  })

  it('rejects a bad name, a missing execute, and a schema that does not compile', async () => {
    const ctx = await registry()
    expect(() => ctx.tools.register(tool('has space'))).toThrow(/letters, digits/)
    expect(() => ctx.tools.register({ ...tool('x'), execute: undefined as never })).toThrow(/no execute/)
    expect(() => ctx.tools.register(tool('y', { parameters: { type: 'object', properties: { a: { type: 'nonsense' } } } }))).toThrow(/not a valid JSON Schema/)
  })

  it('restricts an agent live with allow and deny, hiding the schema and blocking execution', async () => {
    const ctx = await registry()
    ctx.tools.register(tool('read'))
    ctx.tools.register(tool('write'))
    const lift = ctx.tools.restrict('agent-1', { deny: ['write'] })
    expect(ctx.tools.specsFor('agent-1').map((spec) => spec.name)).toEqual(['read'])
    expect(ctx.tools.specsFor('agent-2').map((spec) => spec.name)).toEqual(['read', 'write'])
    const blocked = await ctx.tools.execute({ type: 'tool-call', id: 'c1', name: 'write', args: {} }, exec('agent-1'))
    expect(blocked.result.isError).toBe(true)
    expect(blocked.result.content[0].text).toMatch(/unknown tool "write"/)
    ctx.tools.register(tool('later'))
    ctx.tools.restrict('agent-1', { allow: ['read', 'later'] })
    expect(ctx.tools.specsFor('agent-1').map((spec) => spec.name)).toEqual(['read', 'later'])
    lift()
    expect(ctx.tools.list('agent-1')).toEqual(['read', 'later'])
  })

  it('a filter naming an unknown tool throws and restricts nothing', async () => {
    const ctx = await registry()
    ctx.tools.register(tool('read'))
    expect(() => ctx.tools.restrict('agent-1', { deny: ['raed'] })).toThrow(/"raed", which is not registered/)
    expect(() => ctx.tools.restrict('agent-1', {})).toThrow(/needs `allow` or `deny`/)
    expect(ctx.tools.list('agent-1')).toEqual(['read'])
  })

  it('scopes a registration made through a context marked with an agent id', async () => {
    const ctx = await registry()
    const fiber = await ctx.plugin({ inject: ['tools'], apply: () => {} })
    const agentCtx = fiber.ctx.extend({ [AGENT_SCOPE]: 'agent-7' })
    agentCtx.tools.register(tool('private'))
    expect(ctx.tools.list('agent-7')).toEqual(['private'])
    expect(ctx.tools.list('agent-8')).toEqual([])
    const outcome = await ctx.tools.execute({ type: 'tool-call', id: 'c', name: 'private', args: {} }, exec('agent-7'))
    expect(outcome.result.content[0].text).toBe('private')
  })

  it('passes the call\'s abort signal to the tool and reports an abort as an error result', async () => {
    const ctx = await registry()
    let seen: AbortSignal | undefined
    ctx.tools.register(tool('wait', {
      execute: (_args, execution) => new Promise((_resolve, reject) => {
        seen = execution.signal
        execution.signal.addEventListener('abort', () => reject(new Error('stopped')))
      }),
    }))
    const controller = new AbortController()
    const pending = ctx.tools.execute({ type: 'tool-call', id: 'c', name: 'wait', args: {} }, { ...exec('a'), signal: controller.signal })
    await new Promise((resolve) => setTimeout(resolve, 5))
    controller.abort()
    const outcome = await pending
    expect(seen).toBe(controller.signal)
    expect(outcome.result).toMatchObject({ isError: true, content: [{ text: 'wait was aborted: stopped' }] })
  })

  it('aborts every call of a large concurrent batch when the turn is aborted, each call knowing its own id, with no listener-leak warning', async () => {
    const ctx = await registry()
    const started: string[] = []
    let allStarted!: () => void
    const ready = new Promise<void>((resolve) => { allStarted = resolve })
    const count = 70
    ctx.tools.register(tool('wait', {
      concurrencySafe: true,
      execute: (_args, execution) => new Promise((_resolve, reject) => {
        started.push(execution.callId)
        if (started.length === count) allStarted()
        execution.signal.addEventListener('abort', () => reject(new Error(`stopped ${execution.callId}`)))
        // A tool may listen more than once (its own cleanup, a child's run): no leak warning for that.
        execution.signal.addEventListener('abort', () => {})
        execution.signal.addEventListener('abort', () => {})
      }),
    }))
    const warnings: string[] = []
    const onWarning = (warning: Error) => warnings.push(warning.name)
    process.on('warning', onWarning)
    const calls = Array.from({ length: count }, (_, i) => ({ type: 'tool-call' as const, id: `c${i}`, name: 'wait', args: {} }))
    const controller = new AbortController()
    const pending = ctx.tools.executeAll(calls, { signal: controller.signal, agent: { id: 'a' } })
    await ready
    controller.abort()
    const outcomes = await pending
    await new Promise((resolve) => setImmediate(resolve))
    process.off('warning', onWarning)
    expect(warnings).not.toContain('MaxListenersExceededWarning')
    expect(started).toEqual(calls.map((call) => call.id))
    expect(outcomes.map((outcome) => outcome.result)).toEqual(calls.map((call) => expect.objectContaining({
      callId: call.id, isError: true, content: [{ type: 'text', text: `wait was aborted: stopped ${call.id}` }],
    })))
  })

  it('runs no call of a batch whose turn was aborted before it started', async () => {
    const ctx = await registry()
    let ran = 0
    ctx.tools.register(tool('safe', { concurrencySafe: true, execute: () => { ran++; return 'ran' } }))
    const controller = new AbortController()
    controller.abort()
    const calls = Array.from({ length: 40 }, (_, i) => ({ type: 'tool-call' as const, id: `c${i}`, name: 'safe', args: {} }))
    const outcomes = await ctx.tools.executeAll(calls, { signal: controller.signal, agent: { id: 'a' } })
    expect(ran).toBe(0)
    expect(outcomes.every((outcome) => outcome.result.isError === true && /was not run: the call was aborted/.test(outcome.result.content[0].text))).toBe(true)
  })

  it('reports arguments that were not valid JSON', async () => {
    const ctx = await registry()
    ctx.tools.register(tool('read'))
    const outcome = await ctx.tools.execute({ type: 'tool-call', id: 'c', name: 'read', args: undefined, rawArgs: '{"path": ' }, exec('a'))
    expect(outcome.result.content[0].text).toBe('the arguments of read are not valid JSON: {"path": ')
  })
})
