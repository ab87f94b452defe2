import { afterEach, describe, expect, it } from 'vitest'
import type { Context } from 'cordis'
import { createHarness, type Harness } from '@dsh/testkit/harness'
import { text, type TextBlock } from '@dsh/llm'
import type { Agent } from '@dsh/agent'
import {
  NO_CAPABILITIES,
  SubagentService,
  selectOutput,
  type SubagentCapabilities,
  type SubagentProvider,
  type SubagentRequest,
  type SubagentResult,
  type SubagentRunEndInfo,
  type SubagentRunInfo,
} from '@dsh/subagent'

/** A package-local provider whose child is a promise we settle by hand. */
function scriptedProvider(name: string, capabilities: Partial<SubagentCapabilities> = {}) {
  const calls: SubagentRequest[] = []
  const settle: Array<(result: SubagentResult) => void> = []
  let n = 0
  const provider: SubagentProvider = {
    name,
    capabilities: { ...NO_CAPABILITIES, ...capabilities },
    inheritsParentContext: false,
    async start(request) {
      calls.push(request)
      if (request.signal.aborted) throw new Error('aborted before start')
      let resolve!: (result: SubagentResult) => void
      const result = new Promise<SubagentResult>((r) => (resolve = r))
      settle.push(resolve)
      return { id: `${name}-child-${++n}`, local: false, result, cancel: () => resolve({ output: [], stopReason: 'aborted' }), dispose: async () => {} }
    },
  }
  return { provider, calls, settle }
}

let harness: Harness
let parent: Agent
afterEach(async () => {
  await harness?.dispose()
})

async function setup() {
  harness = await createHarness()
  await harness.plugin(SubagentService)
  parent = await harness.agent()
}

const request = (extra: Partial<SubagentRequest> = {}): SubagentRequest => ({ prompt: [text('do it')], parent, signal: new AbortController().signal, ...extra })

describe('ctx.subagents registry', () => {
  it('a duplicate provider name throws DUPLICATE_PROVIDER and keeps the first', async () => {
    await setup()
    const first = scriptedProvider('remote').provider
    harness.ctx.subagents.registerProvider(first)
    expect(() => harness.ctx.subagents.registerProvider(scriptedProvider('remote').provider)).toThrow(expect.objectContaining({ code: 'DUPLICATE_PROVIDER' }))
    expect(harness.ctx.subagents.getProvider('remote')).toBe(first)
  })

  it('lists names in insertion order and getProvider returns undefined for an unknown name', async () => {
    await setup()
    for (const name of ['b', 'a', 'c']) harness.ctx.subagents.registerProvider(scriptedProvider(name).provider)
    expect(harness.ctx.subagents.list()).toEqual(['b', 'a', 'c'])
    expect(harness.ctx.subagents.getProvider('zzz')).toBeUndefined()
  })

  it('a registration is scoped to its plugin and announced with provider-added / provider-removed', async () => {
    await setup()
    const seen: string[] = []
    harness.ctx.on('subagent/provider-added', (provider) => seen.push(`added:${provider.name}`))
    harness.ctx.on('subagent/provider-removed', (name) => seen.push(`removed:${name}`))
    const { provider } = scriptedProvider('temp')
    const fiber = await harness.ctx.plugin({ inject: ['subagents'], apply: (ctx: Context) => { ctx.subagents.registerProvider(provider) } })
    expect(harness.ctx.subagents.list()).toEqual(['temp'])
    await fiber.dispose()
    expect(harness.ctx.subagents.list()).toEqual([])
    expect(seen).toEqual(['added:temp', 'removed:temp'])
  })

  it('removing a provider never revokes a run it already returned', async () => {
    await setup()
    const scripted = scriptedProvider('temp')
    const dispose = harness.ctx.subagents.registerProvider(scripted.provider)
    const run = await harness.ctx.subagents.start('temp', request())
    dispose()
    scripted.settle[0]({ output: [text('still here')], stopReason: 'completed' })
    expect(await run.result).toEqual({ output: [text('still here')], stopReason: 'completed' })
  })
})

describe('ctx.subagents.start', () => {
  it('an unknown provider rejects with NO_PROVIDER naming it', async () => {
    await setup()
    await expect(harness.ctx.subagents.start('nope', request())).rejects.toMatchObject({ code: 'NO_PROVIDER', message: expect.stringContaining('"nope"') })
  })

  it.each([
    ['outputSchema', { outputSchema: { type: 'object' } }],
    ['depthLimit', { maxDepth: 2 }],
    ['toolFilter', { toolFilter: { deny: ['x'] } }],
    ['persona', { persona: 'a reviewer' }],
  ] as const)('an unsupported %s rejects before the provider\'s start is called', async (feature, extra) => {
    await setup()
    const scripted = scriptedProvider('bare')
    harness.ctx.subagents.registerProvider(scripted.provider)
    await expect(harness.ctx.subagents.start('bare', request(extra))).rejects.toMatchObject({ code: 'UNSUPPORTED_CAPABILITY', message: expect.stringContaining(feature) })
    expect(scripted.calls).toHaveLength(0)
  })

  it.each([
    ['a negative maxDepth', { maxDepth: -1 }, /maxDepth/],
    ['a fractional maxDepth', { maxDepth: 1.5 }, /maxDepth/],
    ['a non-object outputSchema', { outputSchema: 'json' as never }, /outputSchema/],
    ['an empty toolFilter', { toolFilter: {} }, /toolFilter/],
  ] as const)('%s is rejected before any child exists', async (_name, extra, message) => {
    await setup()
    const scripted = scriptedProvider('full', { outputSchema: true, depthLimit: true, toolFilter: true, persona: true })
    harness.ctx.subagents.registerProvider(scripted.provider)
    await expect(harness.ctx.subagents.start('full', request(extra))).rejects.toMatchObject({ code: 'INVALID_REQUEST', message: expect.stringMatching(message) })
    expect(scripted.calls).toHaveLength(0)
  })

  it('a rejected start emits no lifecycle event', async () => {
    await setup()
    const events: string[] = []
    harness.ctx.on('subagent/start', () => events.push('start'))
    harness.ctx.on('subagent/end', () => events.push('end'))
    harness.ctx.subagents.registerProvider(scriptedProvider('p').provider)
    const controller = new AbortController()
    controller.abort()
    await expect(harness.ctx.subagents.start('p', request({ signal: controller.signal }))).rejects.toThrow('aborted before start')
    await new Promise((resolve) => setTimeout(resolve, 5))
    expect(events).toEqual([])
  })

  it('emits start then end with the same fresh runId, and end carries the stop reason', async () => {
    await setup()
    const scripted = scriptedProvider('p')
    harness.ctx.subagents.registerProvider(scripted.provider)
    const starts: SubagentRunInfo[] = []
    const ends: SubagentRunEndInfo[] = []
    harness.ctx.on('subagent/start', (info) => starts.push(info))
    harness.ctx.on('subagent/end', (info) => ends.push(info))
    const runs = [await harness.ctx.subagents.start('p', request({ label: 'first' })), await harness.ctx.subagents.start('p', request())]
    expect(ends).toHaveLength(0)
    scripted.settle[0]({ output: [text('a')], stopReason: 'completed' })
    scripted.settle[1]({ output: [], stopReason: 'error', diagnostic: 'boom' })
    await Promise.all(runs.map((run) => run.result))
    expect(starts.map((info) => info.runId)).toEqual(ends.map((info) => info.runId))
    expect(new Set(starts.map((info) => info.runId)).size).toBe(2)
    expect(starts[0]).toMatchObject({ provider: 'p', id: runs[0].id, local: false, parentId: parent.id, label: 'first' })
    expect(ends[0]).toMatchObject({ stopReason: 'completed', lastAssistantMessage: [text('a')] })
    expect(ends[1]).toMatchObject({ stopReason: 'error', diagnostic: 'boom' })
    expect(ends[1].lastAssistantMessage).toBeUndefined()
  })

  it('end is emitted before the caller\'s await on the result resumes', async () => {
    await setup()
    const scripted = scriptedProvider('p')
    harness.ctx.subagents.registerProvider(scripted.provider)
    const order: string[] = []
    harness.ctx.on('subagent/end', () => order.push('end'))
    const run = await harness.ctx.subagents.start('p', request())
    scripted.settle[0]({ output: [text('x')], stopReason: 'completed' })
    await run.result
    order.push('caller')
    expect(order).toEqual(['end', 'caller'])
  })

  it('a throwing subagent/end listener does not affect its peers or the result', async () => {
    await setup()
    const scripted = scriptedProvider('p')
    harness.ctx.subagents.registerProvider(scripted.provider)
    const peer: string[] = []
    harness.ctx.on('subagent/start', () => { throw new Error('start listener broke') })
    harness.ctx.on('subagent/end', () => { throw new Error('end listener broke') })
    harness.ctx.on('subagent/end', (info) => peer.push(info.stopReason))
    const run = await harness.ctx.subagents.start('p', request())
    scripted.settle[0]({ output: [text('fine')], stopReason: 'completed' })
    expect(await run.result).toEqual({ output: [text('fine')], stopReason: 'completed' })
    expect(peer).toEqual(['completed'])
  })

  it('an async subagent/end listener that rejects is contained: peers run, the result stands, no unhandled rejection', async () => {
    await setup()
    const scripted = scriptedProvider('p')
    harness.ctx.subagents.registerProvider(scripted.provider)
    const unhandled: unknown[] = []
    const onUnhandled = (reason: unknown) => unhandled.push(reason)
    process.on('unhandledRejection', onUnhandled)
    try {
      const peer: string[] = []
      harness.ctx.on('subagent/start', async () => { throw new Error('async start listener broke') })
      harness.ctx.on('subagent/end', async () => { throw new Error('async end listener broke') })
      harness.ctx.on('subagent/end', (info) => peer.push(info.stopReason))
      const run = await harness.ctx.subagents.start('p', request())
      scripted.settle[0]({ output: [text('fine')], stopReason: 'completed' })
      expect(await run.result).toEqual({ output: [text('fine')], stopReason: 'completed' })
      expect(peer).toEqual(['completed'])
      // Unhandled rejections are reported after the microtask queue drains: give them that turn.
      await new Promise((resolve) => setImmediate(resolve))
      expect(unhandled).toEqual([])
    } finally {
      process.off('unhandledRejection', onUnhandled)
    }
  })

  it('a lifecycle listener is an effect of the plugin that registered it: it goes when that plugin unloads', async () => {
    await setup()
    const scripted = scriptedProvider('p')
    harness.ctx.subagents.registerProvider(scripted.provider)
    const seen: string[] = []
    const fiber = await harness.ctx.plugin({
      inject: ['subagents'],
      apply: (ctx: Context) => {
        ctx.on('subagent/start', (info) => void seen.push(info.runId))
      },
    })
    await harness.ctx.subagents.start('p', request())
    expect(seen).toHaveLength(1)
    await fiber.dispose()
    await harness.ctx.subagents.start('p', request())
    expect(seen).toHaveLength(1)
  })

  it('ctx.on returns a disposer that removes the listener', async () => {
    await setup()
    const scripted = scriptedProvider('p')
    harness.ctx.subagents.registerProvider(scripted.provider)
    let calls = 0
    const off = harness.ctx.on('subagent/start', () => void calls++)
    await harness.ctx.subagents.start('p', request())
    off()
    await harness.ctx.subagents.start('p', request())
    expect(calls).toBe(1)
  })

  it('a plugin that registers a lifecycle listener before the service exists, without injecting it, still hears every run', async () => {
    const heard: string[] = []
    harness = await createHarness()
    // Loaded first, and it neither injects nor waits for ctx.subagents.
    await harness.plugin({ name: 'early-observer', apply: (ctx: Context) => void ctx.on('subagent/start', (info) => void heard.push(info.provider)) })
    await harness.plugin(SubagentService)
    parent = await harness.agent()
    const scripted = scriptedProvider('p')
    harness.ctx.subagents.registerProvider(scripted.provider)
    await harness.ctx.subagents.start('p', request())
    expect(heard).toEqual(['p'])
  })

  it('a disposed parent cannot delegate: start rejects PARENT_DISPOSED and the provider is never asked', async () => {
    await setup()
    const scripted = scriptedProvider('p')
    harness.ctx.subagents.registerProvider(scripted.provider)
    await parent.dispose()
    await expect(harness.ctx.subagents.start('p', request())).rejects.toMatchObject({ name: 'SubagentError', code: 'PARENT_DISPOSED' })
    expect(scripted.calls).toEqual([])
  })

  it('mutating lastAssistantMessage does not change result.output', async () => {
    await setup()
    const scripted = scriptedProvider('p')
    harness.ctx.subagents.registerProvider(scripted.provider)
    harness.ctx.on('subagent/end', (info) => {
      info.lastAssistantMessage![0].text = 'corrupted'
      info.lastAssistantMessage!.push(text('extra'))
    })
    const run = await harness.ctx.subagents.start('p', request())
    scripted.settle[0]({ output: [text('original')], stopReason: 'completed' })
    expect((await run.result).output).toEqual([text('original')])
  })

  it('a result that rejects still closes the lifecycle pair with stopReason error and no output', async () => {
    await setup()
    const provider: SubagentProvider = {
      name: 'broken',
      capabilities: NO_CAPABILITIES,
      inheritsParentContext: false,
      start: async () => ({ id: 'x', local: false, result: Promise.reject(new Error('transport vanished')), cancel: () => {}, dispose: async () => {} }),
    }
    harness.ctx.subagents.registerProvider(provider)
    const ends: SubagentRunEndInfo[] = []
    harness.ctx.on('subagent/end', (info) => ends.push(info))
    const run = await harness.ctx.subagents.start('broken', request())
    await expect(run.result).rejects.toThrow('transport vanished')
    expect(ends).toEqual([expect.objectContaining({ stopReason: 'error', diagnostic: expect.stringContaining('transport vanished') })])
    expect(ends[0].lastAssistantMessage).toBeUndefined()
  })
})

describe('output selection', () => {
  const assistant = (...texts: string[]) => ({ role: 'assistant' as const, content: texts.map((value) => text(value)) })
  it('takes the last assistant message with content', () => {
    expect(selectOutput([assistant('first'), assistant('second'), assistant()])).toEqual([text('second')])
  })
  it('falls back to streamed text, then to nothing', () => {
    expect(selectOutput([assistant()], 'streamed')).toEqual([text('streamed')])
    expect(selectOutput([], '')).toEqual([] as TextBlock[])
  })
})
