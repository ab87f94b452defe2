import { Context } from 'cordis'
import { describe, expect, it } from 'vitest'
import { LlmService, userText } from '@dsh/llm'
import { SessionStore } from '@dsh/session'
import ScriptedPlugin, { parseScript, ScriptedAdapter, ScriptError } from '../src/index.js'
import { collect, requestFor, textOfChunks } from './harness.js'

describe('scripted plugin', () => {
  it('registers the adapter as "scripted" and unregisters it when disposed', async () => {
    const ctx = new Context()
    await ctx.plugin(LlmService)
    const fiber = await ctx.plugin(ScriptedPlugin, { scripts: { demo: [{ reply: [{ text: 'hi' }] }] } })
    expect(ctx.llm.list()).toEqual(['scripted'])
    const { adapter, model } = ctx.llm.resolve('scripted:demo')
    expect(adapter).toBeInstanceOf(ScriptedAdapter)
    expect(model).toBe('demo')
    await fiber.dispose()
    expect(ctx.llm.list()).toEqual([])
  })

  it('registers under a configured name, so two scripted adapters can coexist', async () => {
    const ctx = new Context()
    await ctx.plugin(LlmService)
    await ctx.plugin(ScriptedPlugin, { scripts: { demo: [{ reply: [{ text: 'first' }] }] } })
    await ctx.plugin(ScriptedPlugin, { name: 'other', scripts: { demo: [{ reply: [{ text: 'second' }] }] } })
    expect(ctx.llm.list().sort()).toEqual(['other', 'scripted'])
    const { adapter, model } = ctx.llm.resolve('other:demo')
    expect(textOfChunks(await collect(adapter.stream(requestFor(model))))).toBe('second')
  })

  it('waits for ctx.llm before starting', async () => {
    const ctx = new Context()
    const fiber = ctx.plugin(ScriptedPlugin, {})
    await new Promise((resolve) => setTimeout(resolve, 0))
    await ctx.plugin(LlmService)
    await fiber.await()
    expect(ctx.llm.list()).toEqual(['scripted'])
  })

  it('fails to start with an error naming a malformed inline script', async () => {
    const ctx = new Context()
    await ctx.plugin(LlmService)
    const failing = ctx.plugin(ScriptedPlugin, { scripts: { broken: [{ reply: [{ txt: 'oops' }] }] } as never })
    await expect(Promise.resolve(failing).then(() => {})).rejects.toThrow(
      'inline script "broken": rules[0].reply[0]: unknown key "txt"',
    )
    expect(ctx.llm.list()).toEqual([])
  })

  it('builds an adapter from script text without any file', async () => {
    const script = parseScript('- reply:\n    - text: parsed inline\n')
    const adapter = new ScriptedAdapter({ scripts: { demo: script } })
    expect(textOfChunks(await collect(adapter.stream(requestFor('demo'))))).toBe('parsed inline')
    expect(() => parseScript('- reply: [{ txt: x }]', 'fixture.yml')).toThrow(ScriptError)
    expect(() => parseScript('- reply: [{ txt: x }]', 'fixture.yml')).toThrow('fixture.yml: rules[0].reply[0]: unknown key "txt"')
  })

  it('reads session facts from a session store loaded after the plugin', async () => {
    const ctx = new Context()
    await ctx.plugin(LlmService)
    await ctx.plugin(ScriptedPlugin, { scripts: { demo: [{ when: { depth: 1 }, reply: [{ text: 'child' }] }, { reply: [{ text: 'top' }] }] } })
    const { adapter, model } = ctx.llm.resolve('scripted:demo')
    // No store yet: the request's own facts (depth 0).
    expect(textOfChunks(await collect(adapter.stream(requestFor(model, { sessionId: 'early' }))))).toBe('top')
    await ctx.plugin(SessionStore)
    const session = ctx.sessions.create({ id: 'late', delegationDepth: 1 })
    session.append({ type: 'user/message', message: userText('hello') })
    expect(textOfChunks(await collect(adapter.stream(requestFor(model, { sessionId: 'late' }))))).toBe('child')
  })

  it('a session that already holds model replies continues its rule after them (resume)', async () => {
    const ctx = new Context()
    await ctx.plugin(LlmService)
    await ctx.plugin(SessionStore)
    await ctx.plugin(ScriptedPlugin, { scripts: { demo: [{ reply: [{ text: 'first' }, { text: 'second' }, { text: 'third' }] }] } })
    const { adapter, model } = ctx.llm.resolve('scripted:demo')
    // A session read back with two answered turns: what a resumed session looks like.
    const session = ctx.sessions.create({ id: 'resumed' })
    for (const [index, answer] of ['first', 'second'].entries()) {
      session.append({ type: 'step/start', step: index + 1 })
      session.append({ type: 'user/message', message: userText('again') })
      session.append({ type: 'assistant/message', message: { role: 'assistant', content: [{ type: 'text', text: answer }] } })
    }
    // The step that makes this request.
    session.append({ type: 'step/start', step: 3 })
    expect(textOfChunks(await collect(adapter.stream(requestFor(model, { sessionId: 'resumed' }))))).toBe('third')
    // A fresh session of the same rule still starts at the first reply.
    const fresh = ctx.sessions.create({ id: 'fresh' })
    fresh.append({ type: 'step/start', step: 1 })
    fresh.append({ type: 'user/message', message: userText('hi') })
    expect(textOfChunks(await collect(adapter.stream(requestFor(model, { sessionId: 'fresh' }))))).toBe('first')
  })

  it('a released session loses its binding, and continues where its log left off when it comes back', async () => {
    const ctx = new Context()
    await ctx.plugin(LlmService)
    await ctx.plugin(SessionStore)
    const fiber = ctx.plugin(ScriptedPlugin, { scripts: { demo: [{ reply: [{ text: 'first' }, { text: 'second' }] }] } })
    await fiber
    const { adapter, model } = ctx.llm.resolve('scripted:demo')
    const scripted = adapter as ScriptedAdapter
    const session = ctx.sessions.create({ id: 'comes-back' })
    session.append({ type: 'step/start', step: 1 })
    session.append({ type: 'user/message', message: userText('hi') })
    expect(textOfChunks(await collect(adapter.stream(requestFor(model, { sessionId: 'comes-back' }))))).toBe('first')
    session.append({ type: 'assistant/message', message: { role: 'assistant', content: [{ type: 'text', text: 'first' }] } })
    expect(scripted.sessionCount).toBe(1)
    await ctx.sessions.release(session)
    expect(scripted.sessionCount).toBe(0)
    // The same log made live again (a resume): its next request gets the next reply.
    const again = ctx.sessions.create({ id: 'comes-back' })
    again.restore(session.events())
    again.append({ type: 'step/start', step: 2 })
    expect(textOfChunks(await collect(adapter.stream(requestFor(model, { sessionId: 'comes-back' }))))).toBe('second')
  })
})
