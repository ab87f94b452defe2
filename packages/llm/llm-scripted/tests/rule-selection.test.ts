import { describe, expect, it } from 'vitest'
import { ScriptedAdapter } from '../src/index.js'
import { collect, requestFor, scriptedContext, textOfChunks } from './harness.js'

describe('rule selection', () => {
  it('binds a session to the first rule whose prompt regex matches its own prompt', async () => {
    const { ask } = await scriptedContext({
      scripts: {
        demo: [
          { when: { prompt: '^weather' }, reply: [{ text: 'sunny' }] },
          { when: { prompt: 'files?' }, reply: [{ text: 'listing files' }] },
          { when: { prompt: 'files' }, reply: [{ text: 'never reached' }] },
        ],
      },
    })
    expect(textOfChunks(await ask('scripted:demo', { sessionId: 'a', prompt: 'weather today' }))).toBe('sunny')
    expect(textOfChunks(await ask('scripted:demo', { sessionId: 'b', prompt: 'list the files here' }))).toBe('listing files')
  })

  it('requires depth to equal the delegation depth when given', async () => {
    const { ask } = await scriptedContext({
      scripts: {
        demo: [
          { when: { prompt: 'count', depth: 1 }, reply: [{ text: 'child counting' }] },
          { when: { prompt: 'count', depth: 0 }, reply: [{ text: 'parent counting' }] },
        ],
      },
    })
    expect(textOfChunks(await ask('scripted:demo', { sessionId: 'p', prompt: 'count', depth: 0 }))).toBe('parent counting')
    expect(textOfChunks(await ask('scripted:demo', { sessionId: 'c', prompt: 'count', depth: 1 }))).toBe('child counting')
  })

  it('treats a rule without when as matching any session', async () => {
    const { ask } = await scriptedContext({
      scripts: { demo: [{ when: { prompt: 'special' }, reply: [{ text: 'special' }] }, { reply: [{ text: 'fallback' }] }] },
    })
    expect(textOfChunks(await ask('scripted:demo', { prompt: 'anything at all', depth: 3 }))).toBe('fallback')
  })

  it('matches a fork child on its own delegated prompt, not on the seeded history', async () => {
    const { ask } = await scriptedContext({
      scripts: {
        demo: [
          { when: { prompt: 'parent task' }, reply: [{ text: 'parent reply' }] },
          { when: { prompt: 'summarise' }, reply: [{ text: 'child reply' }] },
        ],
      },
    })
    const seeded = [
      { role: 'user' as const, content: [{ type: 'text' as const, text: 'parent task' }] },
      { role: 'assistant' as const, content: [{ type: 'text' as const, text: 'working' }] },
      { role: 'user' as const, content: [{ type: 'text' as const, text: 'summarise the log' }] },
    ]
    const chunks = await ask('scripted:demo', { sessionId: 'child', prompt: 'summarise the log', depth: 1, messages: seeded })
    expect(textOfChunks(chunks)).toBe('child reply')
  })

  it('consumes replies in order, with a separate cursor for each session on the same rule', async () => {
    const { ask } = await scriptedContext({
      scripts: { demo: [{ reply: [{ text: 'first' }, { text: 'second' }, { text: 'third' }] }] },
    })
    expect(textOfChunks(await ask('scripted:demo', { sessionId: 'a' }))).toBe('first')
    expect(textOfChunks(await ask('scripted:demo', { sessionId: 'a' }))).toBe('second')
    expect(textOfChunks(await ask('scripted:demo', { sessionId: 'b' }))).toBe('first')
    expect(textOfChunks(await ask('scripted:demo', { sessionId: 'a' }))).toBe('third')
    expect(textOfChunks(await ask('scripted:demo', { sessionId: 'b' }))).toBe('second')
  })

  it('keeps a session on the rule it was bound to by its first request', async () => {
    const { ask } = await scriptedContext({
      scripts: {
        demo: [
          { when: { depth: 1 }, reply: [{ text: 'deep one' }, { text: 'deep two' }] },
          { reply: [{ text: 'shallow one' }, { text: 'shallow two' }] },
        ],
      },
    })
    expect(textOfChunks(await ask('scripted:demo', { sessionId: 's', depth: 1 }))).toBe('deep one')
    // Origins of one session do not change in practice; the binding would hold even if they did.
    expect(textOfChunks(await ask('scripted:demo', { sessionId: 's', depth: 0 }))).toBe('deep two')
  })

  it('forget() lets a session start over from its first reply', async () => {
    const { ctx, ask } = await scriptedContext({ scripts: { demo: [{ reply: [{ text: 'one' }, { text: 'two' }] }] } })
    expect(textOfChunks(await ask('scripted:demo', { sessionId: 'a' }))).toBe('one')
    const adapter = ctx.llm.getAdapter('scripted') as ScriptedAdapter
    expect(adapter.sessionCount).toBe(1)
    expect(adapter.forget('a')).toBe(true)
    expect(adapter.sessionCount).toBe(0)
    expect(textOfChunks(await ask('scripted:demo', { sessionId: 'a' }))).toBe('one')
  })

  it('holds at most maxSessions cursors, dropping the least recently used session first', async () => {
    const adapter = new ScriptedAdapter({ maxSessions: 2, scripts: { demo: [{ reply: [{ text: 'one' }, { text: 'two' }] }] } })
    const ask = (sessionId: string) => collect(adapter.stream(requestFor('demo', { sessionId })))
    await ask('a')
    await ask('b')
    await ask('a') // a is now the most recently used
    await ask('c') // evicts b
    expect(adapter.sessionCount).toBe(2)
    await expect(ask('a')).rejects.toThrow(/has only 2 replies/) // a kept its cursor
    expect(textOfChunks(await ask('b'))).toBe('one') // b starts over
  })

  it('reads the prompt and depth from the session itself, not from the request', async () => {
    const { ctx, ask } = await scriptedContext({ scripts: { demo: [{ when: { prompt: '^child task$', depth: 2 }, reply: [{ text: 'matched from the session' }] }] } })
    const session = ctx.sessions.create({ id: 'deep', delegationDepth: 2 })
    session.append({ type: 'user/message', message: { role: 'user', content: [{ type: 'text', text: 'child task' }] } })
    // The request's own history says something else: only the session's facts count.
    const messages = [{ role: 'user' as const, content: [{ type: 'text' as const, text: 'seeded parent prompt' }] }]
    expect(textOfChunks(await ask('scripted:demo', { sessionId: 'deep', messages }))).toBe('matched from the session')
  })

  it('matches a session nobody can look up on its request\'s first user message, at depth 0', async () => {
    const adapter = new ScriptedAdapter({ scripts: { demo: [{ when: { prompt: 'hello', depth: 1 }, reply: [{ text: 'deep' }] }, { when: { prompt: 'hello', depth: 0 }, reply: [{ text: 'top' }] }] } })
    expect(textOfChunks(await collect(adapter.stream(requestFor('demo', { prompt: 'hello there' }))))).toBe('top')
  })
})
