import { afterEach, describe, expect, it } from 'vitest'
import { withoutFrameworkStacks } from '../src/framework-stacks.js'

const framesOf = (error: Error) => (error.stack ?? '').split('\n').filter((line) => /^\s+at /.test(line)).length

describe('withoutFrameworkStacks', () => {
  const limit = Error.stackTraceLimit
  afterEach(() => {
    Error.stackTraceLimit = limit
  })

  it('errors created inside have no stack frames, and the limit is restored afterwards', async () => {
    const inside = await withoutFrameworkStacks(false, async () => new Error('inside'))
    expect(framesOf(inside)).toBe(0)
    expect(inside.message).toBe('inside')
    expect(Error.stackTraceLimit).toBe(limit)
    expect(framesOf(new Error('after'))).toBeGreaterThan(0)
  })

  it('keeps stacks when asked to (verbose)', async () => {
    const inside = await withoutFrameworkStacks(true, async () => new Error('inside'))
    expect(framesOf(inside)).toBeGreaterThan(0)
  })

  it('a nested scope ending does not restore stacks while the outer one is still open', async () => {
    const afterInner = await withoutFrameworkStacks(false, async () => {
      await withoutFrameworkStacks(false, async () => undefined)
      return new Error('after the inner scope')
    })
    expect(framesOf(afterInner)).toBe(0)
    expect(Error.stackTraceLimit).toBe(limit)
  })

  it('restores the limit when the work throws or rejects, and passes the failure on', async () => {
    await expect(withoutFrameworkStacks(false, () => {
      throw new Error('thrown')
    })).rejects.toThrow('thrown')
    expect(Error.stackTraceLimit).toBe(limit)
    await expect(withoutFrameworkStacks(false, async () => Promise.reject(new Error('rejected')))).rejects.toThrow('rejected')
    expect(Error.stackTraceLimit).toBe(limit)
  })
})
