import { describe, expect, it } from 'vitest'
import { Context } from 'cordis'
import { SessionStore } from '@dsh/session'

async function storeOnly(): Promise<SessionStore> {
  const ctx = new Context()
  await ctx.plugin(SessionStore)
  return ctx.sessions
}

describe('sessions.release', () => {
  it('tells observers one at a time in order: one after a flushing one waits for that flush', async () => {
    const sessions = await storeOnly()
    const order: string[] = []
    let finishFlush!: () => void
    sessions.addObserver({ released: () => void order.push('first') })
    sessions.addObserver({
      released: () => {
        order.push('second flushing')
        return new Promise<void>((resolve) => (finishFlush = resolve))
      },
    })
    sessions.addObserver({ released: () => void order.push('third') })
    const session = sessions.create()
    let settled = false
    const released = sessions.release(session).then(() => (settled = true))
    await new Promise((resolve) => setImmediate(resolve))
    expect(order).toEqual(['first', 'second flushing'])
    expect(settled).toBe(false)
    finishFlush()
    await released
    expect(order).toEqual(['first', 'second flushing', 'third'])
  })

  it('an observer that throws is reported by the release and the others are still told', async () => {
    const sessions = await storeOnly()
    const told: string[] = []
    sessions.addObserver({
      released: () => {
        throw new Error('observer broke')
      },
    })
    sessions.addObserver({ released: () => void told.push('second') })
    const session = sessions.create()
    await expect(sessions.release(session)).rejects.toThrow('observer broke')
    expect(told).toEqual(['second'])
    expect(session.released).toBe(true)
  })

  it('failures before and after a flush are all reported, in an AggregateError', async () => {
    const sessions = await storeOnly()
    sessions.addObserver({
      released: () => {
        throw new Error('before')
      },
    })
    sessions.addObserver({ released: () => Promise.reject(new Error('the flush')) })
    sessions.addObserver({
      released: () => {
        throw new Error('after')
      },
    })
    const session = sessions.create()
    const failure = await sessions.release(session).then(
      () => undefined,
      (error: unknown) => error,
    )
    expect(failure).toBeInstanceOf(AggregateError)
    expect((failure as AggregateError).errors.map((error: Error) => error.message)).toEqual(['before', 'the flush', 'after'])
  })
})
