import { describe, expect, it } from 'vitest'
import { Context } from 'cordis'
import { ToolRegistry, type ToolAgent, type ToolCallBlock, type ToolDefinition, type ToolPermissionGate, type ToolPermissionRequest } from '@dsh/tools'

async function registryWith(ran: string[]) {
  const ctx = new Context()
  await ctx.plugin(ToolRegistry)
  const tool = (name: string, extra: Partial<ToolDefinition> = {}): ToolDefinition => ({
    name,
    description: `the ${name} tool`,
    parameters: { type: 'object', properties: {} },
    execute: () => {
      ran.push(name)
      return `${name} ran`
    },
    ...extra,
  })
  ctx.tools.register(tool('shell', { sideEffecting: true }))
  ctx.tools.register(tool('read'))
  return ctx
}

const call = (name: string, id = 'c1'): ToolCallBlock => ({ type: 'tool-call', id, name, args: {} })
const exec = (signal = new AbortController().signal) => ({ signal, callId: 'c1', agent: { id: 'a1' } as ToolAgent })

describe('permission gates', () => {
  it('a rejecting gate stops a side-effecting call before it runs: the model sees an error naming who refused, and the outcome records the decision', async () => {
    const ran: string[] = []
    const ctx = await registryWith(ran)
    const asked: ToolPermissionRequest[] = []
    ctx.tools.addPermissionGate((request) => {
      asked.push(request)
      return { decision: 'reject', by: 'the test client', reason: 'not today' }
    })
    const outcome = await ctx.tools.execute(call('shell'), exec())
    expect(ran).toEqual([])
    expect(asked.map((request) => [request.tool.name, request.call.id, request.agent.id])).toEqual([['shell', 'c1', 'a1']])
    expect(outcome.result).toMatchObject({ isError: true, content: [{ text: 'shell was not run: permission denied by the test client: not today' }] })
    expect(outcome.permission).toEqual({ decision: 'reject', by: 'the test client', reason: 'not today' })
  })

  it('a tool not marked side-effecting is never put to the gates', async () => {
    const ran: string[] = []
    const ctx = await registryWith(ran)
    let asked = 0
    ctx.tools.addPermissionGate(() => {
      asked++
      return { decision: 'reject', by: 'x', reason: 'y' }
    })
    const outcome = await ctx.tools.execute(call('read'), exec())
    expect(asked).toBe(0)
    expect(ran).toEqual(['read'])
    expect(outcome.permission).toBeUndefined()
  })

  it('gates are asked in order: the first rejection wins over an earlier allow, and an allow is recorded with the result', async () => {
    const ran: string[] = []
    const ctx = await registryWith(ran)
    const order: string[] = []
    const allow: ToolPermissionGate = () => {
      order.push('allow')
      return { decision: 'allow-once', by: 'first' }
    }
    const noOpinion: ToolPermissionGate = () => {
      order.push('none')
      return undefined
    }
    ctx.tools.addPermissionGate(allow)
    const removeSecond = ctx.tools.addPermissionGate(noOpinion)
    const allowed = await ctx.tools.execute(call('shell'), exec())
    expect(order).toEqual(['allow', 'none'])
    expect(allowed.permission).toEqual({ decision: 'allow-once', by: 'first' })
    expect(allowed.result.isError).toBeUndefined()
    removeSecond()
    ctx.tools.addPermissionGate(() => ({ decision: 'reject', by: 'second', reason: 'no' }))
    const refused = await ctx.tools.execute(call('shell', 'c2'), exec())
    expect(refused.permission).toMatchObject({ decision: 'reject', by: 'second' })
    expect(ran).toEqual(['shell'])
  })

  it('a gate that throws rejects the call with the reason', async () => {
    const ran: string[] = []
    const ctx = await registryWith(ran)
    ctx.tools.addPermissionGate(() => {
      throw new Error('the client went away')
    })
    const outcome = await ctx.tools.execute(call('shell'), exec())
    expect(ran).toEqual([])
    expect(outcome.permission).toMatchObject({ decision: 'reject', reason: 'the permission check failed: the client went away' })
  })

  it('a call aborted while a gate waits does not run, even if the gate then allows it', async () => {
    const ran: string[] = []
    const ctx = await registryWith(ran)
    const controller = new AbortController()
    let release!: () => void
    ctx.tools.addPermissionGate(async () => {
      await new Promise<void>((resolve) => (release = resolve))
      return { decision: 'allow-once', by: 'late' }
    })
    const pending = ctx.tools.execute(call('shell'), exec(controller.signal))
    await new Promise((resolve) => setImmediate(resolve))
    controller.abort()
    release()
    const outcome = await pending
    expect(ran).toEqual([])
    expect(outcome.result.isError).toBe(true)
  })

  it('with no gate a side-effecting call runs and carries no decision; a gate goes with the plugin that added it', async () => {
    const ran: string[] = []
    const ctx = await registryWith(ran)
    const fiber = await ctx.plugin({ inject: ['tools'], apply: (child: Context) => void child.tools.addPermissionGate(() => ({ decision: 'reject', by: 'plugin', reason: 'no' })) })
    expect((await ctx.tools.execute(call('shell'), exec())).permission).toMatchObject({ decision: 'reject' })
    await fiber.dispose()
    const outcome = await ctx.tools.execute(call('shell', 'c2'), exec())
    expect(outcome.permission).toBeUndefined()
    expect(ran).toEqual(['shell'])
  })
})
