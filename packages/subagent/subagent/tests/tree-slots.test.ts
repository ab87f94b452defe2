/**
 * The slots of one delegation tree (`src/tree-slots.ts`), the tree gate's own part: tested
 * directly, with no agent or provider (a slot is only a count and a queue).
 */
import { describe, expect, it } from 'vitest'
import { SubagentError } from '@dsh/subagent'
import { TreeSlots, type Lender, type Slot, type SlotCaps } from '../src/tree-slots.js'

function caps(maxConcurrent: number | undefined, perProvider: Record<string, number> = {}, maxQueued = 1000): SlotCaps {
  return { maxConcurrent, maxQueued, perProvider: new Map(Object.entries(perProvider)) }
}

/** A waiter that records when it was granted (its name, in `order`) and what it was told of its wait. */
function queued(slots: TreeSlots, name: string, order: string[], provider = 'spawn', signal = new AbortController().signal) {
  const announced: boolean[] = []
  const granted = slots.wait(provider, signal, (waiting) => announced.push(waiting)).then((slot) => {
    order.push(name)
    return slot
  })
  return { granted, announced }
}

/** Let promise callbacks run (a grant resolves a promise). */
const settle = () => new Promise((resolve) => setImmediate(resolve))

describe('the slots of a tree', () => {
  it('grants a freed slot to the waiters in the order they queued, one release each', async () => {
    const slots = new TreeSlots(caps(1))
    const first = slots.take('spawn')!
    expect(slots.take('spawn')).toBeUndefined()
    const order: string[] = []
    const a = queued(slots, 'a', order)
    const b = queued(slots, 'b', order)
    const c = queued(slots, 'c', order)
    expect(slots.waiting).toBe(3)
    expect(a.announced).toEqual([true])

    slots.release(first)
    const slotA = await a.granted
    await settle()
    expect(order).toEqual(['a'])
    expect(a.announced).toEqual([true, false])
    expect(slots.running).toBe(1)

    slots.release(slotA)
    const slotB = await b.granted
    await settle()
    expect(order).toEqual(['a', 'b'])
    slots.release(slotB)
    await c.granted
    expect(order).toEqual(['a', 'b', 'c'])
    expect(slots.waiting).toBe(0)
  })

  it('skips a waiter cancelled while it waited: it is refused ABORTED and the next in line gets the slot', async () => {
    const slots = new TreeSlots(caps(1))
    const held = slots.take('spawn')!
    const order: string[] = []
    const cancel = new AbortController()
    const a = queued(slots, 'a', order, 'spawn', cancel.signal)
    const b = queued(slots, 'b', order)
    cancel.abort(new Error('the user pressed escape'))
    const refused = await a.granted.then(
      () => undefined,
      (error: unknown) => error,
    )
    expect(refused).toBeInstanceOf(SubagentError)
    expect((refused as SubagentError).code).toBe('ABORTED')
    expect(a.announced).toEqual([true, false])
    expect(slots.waiting).toBe(1)

    slots.release(held)
    await b.granted
    expect(order).toEqual(['b'])
  })

  it('serves the first waiter whose provider has room: one at its provider cap holds up nobody behind it', async () => {
    const slots = new TreeSlots(caps(3, { acp: 1 }))
    const acp = slots.take('acp')!
    const spawn = slots.take('spawn')!
    slots.take('spawn')
    expect(slots.take('spawn')).toBeUndefined()
    const order: string[] = []
    const waitingAcp = queued(slots, 'acp-2', order, 'acp')
    const waitingSpawn = queued(slots, 'spawn-3', order, 'spawn')
    // A spawn slot frees: the acp waiter ahead is still at its provider's cap, so the spawn one goes.
    slots.release(spawn)
    await waitingSpawn.granted
    expect(order).toEqual(['spawn-3'])
    // The acp slot frees: the acp waiter goes.
    slots.release(acp)
    await waitingAcp.granted
    expect(order).toEqual(['spawn-3', 'acp-2'])
  })

  it('lends a running parent’s slot to one child of its own when the tree is full, and takes it back without serving the queue', async () => {
    const slots = new TreeSlots(caps(1))
    slots.take('spawn')
    const parent: Lender = { lent: false }
    const order: string[] = []
    const stranger = queued(slots, 'stranger', order)

    // The parent waits on its child: its slot goes to that child, past the queue.
    const lent = slots.lend(parent, 'spawn')
    expect(lent).toEqual({ lender: parent, provider: 'spawn' })
    expect(parent.lent).toBe(true)
    expect(slots.running).toBe(1)
    // One loan at a time: a second child of the same parent waits like anyone else.
    expect(slots.lend(parent, 'spawn')).toBeUndefined()
    // The root (no running child) has no slot to lend.
    expect(slots.lend(undefined, 'spawn')).toBeUndefined()

    // The child ends: the slot goes back to its lender, not to the queue.
    slots.release(lent!)
    expect(parent.lent).toBe(false)
    await settle()
    expect(order).toEqual([])
    expect(slots.waiting).toBe(1)
    expect(slots.lend(parent, 'spawn')).toBeDefined()
    void stranger.granted.catch(() => undefined)
    slots.refuseAll(new Error('done'))
  })

  it('is full at maxQueued waiters and says why in words', () => {
    const slots = new TreeSlots(caps(1, { acp: 1 }, 2))
    slots.take('acp')
    expect(slots.full).toBe(false)
    const waiters = [slots.wait('acp', new AbortController().signal, () => {}), slots.wait('acp', new AbortController().signal, () => {})]
    expect(slots.full).toBe(true)
    const error = slots.queueFull('root-1', 'acp')
    expect(error.code).toBe('QUEUE_FULL')
    expect(error.message).toBe('the delegation tree of root-1 has 1 children running (maxConcurrent 1, 1 at once on acp) and 2 waiting, the most allowed (maxQueued 2); wait for some to finish before delegating more')
    for (const waiter of waiters) void waiter.catch(() => undefined)
    slots.refuseAll(new Error('done'))
  })

  it('refuses every waiter in order with the given error, each told it left the queue, and serves nobody after', async () => {
    const slots = new TreeSlots(caps(1))
    const held: Slot = slots.take('spawn')!
    const refusedOrder: string[] = []
    const told: string[] = []
    const refusal = new SubagentError('BUDGET', 'spent')
    const waiters = ['a', 'b', 'c'].map((name) =>
      slots
        .wait('spawn', new AbortController().signal, (waiting) => {
          if (!waiting) told.push(name)
        })
        .catch((error: unknown) => {
          refusedOrder.push(name)
          return error
        }),
    )
    slots.refuseAll(refusal)
    expect(told).toEqual(['a', 'b', 'c'])
    expect(await Promise.all(waiters)).toEqual([refusal, refusal, refusal])
    expect(refusedOrder).toEqual(['a', 'b', 'c'])
    expect(slots.waiting).toBe(0)
    slots.release(held)
    expect(slots.running).toBe(0)
  })
})
