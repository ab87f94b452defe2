import { describe, expect, it } from 'vitest'
import { FifoSlots } from '../src/slots.js'

describe('FifoSlots', () => {
  it('runs at most limit at once and grants waiters in arrival order', async () => {
    const slots = new FifoSlots(1)
    const never = new AbortController().signal
    await slots.acquire(never)
    const order: string[] = []
    const first = slots.acquire(never).then(() => order.push('first'))
    const second = slots.acquire(never).then(() => order.push('second'))
    expect(slots.active).toBe(1)
    expect(slots.queued).toBe(2)
    slots.release()
    await first
    expect(order).toEqual(['first'])
    slots.release()
    await second
    expect(order).toEqual(['first', 'second'])
  })

  it('a waiter whose signal aborts leaves the queue with its reason and takes no slot', async () => {
    const slots = new FifoSlots(1)
    await slots.acquire(new AbortController().signal)
    const leaving = new AbortController()
    const waiting = slots.acquire(leaving.signal)
    leaving.abort(new Error('gone'))
    await expect(waiting).rejects.toThrow('gone')
    expect(slots.queued).toBe(0)
    slots.release()
    expect(slots.active).toBe(0)
  })

  it('is full only when every slot runs and maxQueued wait', async () => {
    const slots = new FifoSlots(1, 1)
    const never = new AbortController().signal
    expect(slots.full).toBe(false)
    await slots.acquire(never)
    expect(slots.full).toBe(false)
    void slots.acquire(never)
    expect(slots.full).toBe(true)
  })
})
