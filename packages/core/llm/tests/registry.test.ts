import { describe, expect, it } from 'vitest'
import { Context } from 'cordis'
import { LlmService, historyOf, userText, type LlmAdapter } from '@dsh/llm'

const adapter = (name: string, defaultModel?: string): LlmAdapter => ({
  name,
  defaultModel,
  async *stream() {
    yield { type: 'finish', reason: 'stop' }
  },
})

describe('ctx.llm', () => {
  it('registers adapters by name, rejects a duplicate, and unregisters with the plugin', async () => {
    const ctx = new Context()
    await ctx.plugin(LlmService)
    const fiber = await ctx.plugin({ inject: ['llm'], apply: (child: Context) => { child.llm.registerAdapter(adapter('one')) } })
    expect(() => ctx.llm.registerAdapter(adapter('one'))).toThrow(/already registered/)
    expect(ctx.llm.list()).toEqual(['one'])
    await fiber.dispose()
    expect(ctx.llm.list()).toEqual([])
  })

  it('resolves adapter:model specs, an adapter\'s default model, and the configured default', async () => {
    const ctx = new Context()
    await ctx.plugin(LlmService, { model: 'deep:chat' })
    ctx.llm.registerAdapter(adapter('deep', 'chat-default'))
    expect(ctx.llm.resolve('deep:reasoner').model).toBe('reasoner')
    expect(ctx.llm.resolve('deep').model).toBe('chat-default')
    expect(ctx.llm.resolve().model).toBe('chat')
    expect(ctx.llm.resolve('scripted:./a:b.yml'.replace('scripted', 'deep')).model).toBe('./a:b.yml')
    expect(() => ctx.llm.resolve('nope:x')).toThrow(/adapter "nope", which is not loaded \(loaded: deep\)/)
  })

  it('says how to pick a model when none is configured', async () => {
    const ctx = new Context()
    await ctx.plugin(LlmService)
    expect(() => ctx.llm.resolve()).toThrow(/no model configured: pass --model/)
  })

  it('rejects an invalid config naming the key', async () => {
    const ctx = new Context()
    await expect(Promise.resolve(ctx.plugin(LlmService, { model: 42 } as never)).then(() => {})).rejects.toThrow(/model/)
  })

  it('historyOf gives a read-only view over messages', () => {
    const history = historyOf([userText('a'), userText('b')])
    expect(history.length).toBe(2)
    expect(history.at(-1)).toEqual(userText('b'))
    expect([...history]).toHaveLength(2)
    expect(history.toArray()).not.toBe(history.toArray())
  })

  it('interceptors see every resolved model in registration order and go with their plugin', async () => {
    const ctx = new Context()
    await ctx.plugin(LlmService)
    const real = adapter('real', 'm')
    const stand = adapter('stand-in')
    ctx.llm.registerAdapter(real)
    const seen: string[] = []
    const first = await ctx.plugin({ inject: ['llm'], apply: (child: Context) => void child.llm.intercept((resolved) => (seen.push(`first ${resolved.adapter.name}`), { ...resolved, adapter: stand })) })
    await ctx.plugin({ inject: ['llm'], apply: (child: Context) => void child.llm.intercept((resolved) => (seen.push(`second ${resolved.adapter.name}`), resolved)) })
    expect(ctx.llm.resolve('real').adapter).toBe(stand)
    expect(seen).toEqual(['first real', 'second stand-in'])
    await first.dispose()
    expect(ctx.llm.resolve('real').adapter).toBe(real)
  })

  it('without a recording plugin, no child link is given and adopting one is refused', async () => {
    const ctx = new Context()
    await ctx.plugin(LlmService)
    expect(ctx.llm.childRecordingLink('parent', 'call_1')).toBeUndefined()
    expect(() => ctx.llm.adoptRecordingLink('s', { mode: 'replay', dir: '/r', lineage: 'root.call_1' })).toThrow(expect.objectContaining({ code: 'NO_RECORDING', message: expect.stringContaining('no recording plugin (@dsh/llm-replay) is loaded') }))
  })
})
