import { describe, expect, it } from 'vitest'
import { Session } from '@dsh/session'

describe('session listeners', () => {
  it('an async listener that rejects is contained and reported like one that throws, and its peers still hear', async () => {
    const reported: unknown[] = []
    const session = new Session({ id: 's-1', createdAt: new Date(0).toISOString(), cwd: '/work' }, undefined, (error) => reported.push(error))
    const heard: string[] = []
    session.subscribe(async () => {
      throw new Error('async listener failed')
    })
    session.subscribe(() => {
      throw new Error('sync listener failed')
    })
    session.subscribe((update) => heard.push(update.type))
    session.append({ type: 'turn/start', turn: 1 })
    await new Promise((resolve) => setImmediate(resolve))
    expect(heard).toEqual(['turn/start'])
    expect(reported.map((error) => (error as Error).message).sort()).toEqual(['async listener failed', 'sync listener failed'])
  })
})
