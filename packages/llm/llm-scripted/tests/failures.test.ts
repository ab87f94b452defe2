import { describe, expect, it } from 'vitest'
import { LlmError } from '@dsh/llm'
import { ScriptError } from '../src/index.js'
import { scriptedContext, textOfChunks } from './harness.js'

describe('scripted failures', () => {
  it('an error item fails the request with an LlmError carrying its message', async () => {
    const { ask } = await scriptedContext({ scripts: { demo: [{ reply: [{ error: 'rate limited, try later' }, { text: 'recovered' }] }] } })
    const failure = await ask('scripted:demo').catch((error: unknown) => error)
    expect(failure).toBeInstanceOf(LlmError)
    expect((failure as LlmError).message).toBe('rate limited, try later')
    // The error item counts as a reply: a retry gets the next one.
    expect(textOfChunks(await ask('scripted:demo'))).toBe('recovered')
  })

  it('no matching rule fails with an LlmError naming the session, prompt and depth', async () => {
    const { ask } = await scriptedContext({ scripts: { demo: [{ when: { prompt: '^deploy' }, reply: [{ text: 'ok' }] }] } })
    const failure = await ask('scripted:demo', { sessionId: '0abc-123', prompt: 'what is the time?', depth: 1 }).catch((error: unknown) => error)
    expect(failure).toBeInstanceOf(LlmError)
    expect(failure).toMatchObject({ name: 'ScriptError', code: 'NO_RULE' })
    expect((failure as Error).message).toBe(
      'scripted model: no reply for session 0abc-123 (prompt "what is the time?", depth 1): no rule in inline script "demo" matches',
    )
  })

  it('running out of replies fails with an LlmError naming the session, prompt and rule', async () => {
    const { ask } = await scriptedContext({
      scripts: { demo: [{ when: { prompt: 'x' }, reply: [{ text: 'no' }] }, { reply: [{ text: 'one' }, { text: 'two' }] }] },
    })
    await ask('scripted:demo', { sessionId: 's-9', prompt: 'hello there' })
    await ask('scripted:demo', { sessionId: 's-9', prompt: 'hello there' })
    const failure = await ask('scripted:demo', { sessionId: 's-9', prompt: 'hello there' }).catch((error: unknown) => error)
    expect(failure).toBeInstanceOf(ScriptError)
    expect(failure).toBeInstanceOf(LlmError)
    expect((failure as ScriptError).code).toBe('OUT_OF_REPLIES')
    expect((failure as Error).message).toBe(
      'scripted model: no reply for session s-9 (prompt "hello there", depth 0): rules[1] in inline script "demo" has only 2 replies',
    )
  })

  it('shortens a long prompt in the no-reply message', async () => {
    const { ask } = await scriptedContext({ scripts: { demo: [{ when: { depth: 5 }, reply: [{ text: 'x' }] }] } })
    const failure = await ask('scripted:demo', { prompt: 'a'.repeat(500) }).catch((error: unknown) => error)
    expect((failure as Error).message).toContain(`"${'a'.repeat(80)}…"`)
  })

  it('delay_ms waits before answering', async () => {
    const { ask } = await scriptedContext({ scripts: { demo: [{ reply: [{ text: 'late', delay_ms: 60 }] }] } })
    const started = performance.now()
    expect(textOfChunks(await ask('scripted:demo'))).toBe('late')
    expect(performance.now() - started).toBeGreaterThanOrEqual(55)
  })

  it('an abort during delay_ms ends the request quickly with an AbortError', async () => {
    // The delay outlasts the test's timeout: only the abort can end the request in time.
    const { ask } = await scriptedContext({ scripts: { demo: [{ reply: [{ text: 'never', delay_ms: 60_000 }] }] } })
    const controller = new AbortController()
    setTimeout(() => controller.abort(), 20)
    const failure = await ask('scripted:demo', { signal: controller.signal }).catch((error: unknown) => error)
    expect(failure).toMatchObject({ name: 'AbortError' })
  })

  it('a request whose signal is already aborted fails with an AbortError', async () => {
    const { ask } = await scriptedContext({ scripts: { demo: [{ reply: [{ text: 'never' }] }] } })
    const controller = new AbortController()
    controller.abort()
    await expect(ask('scripted:demo', { signal: controller.signal })).rejects.toMatchObject({ name: 'AbortError' })
  })
})
