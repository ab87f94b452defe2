import { describe, expect, it } from 'vitest'
import { newSessionId } from '../src/store.js'

describe('session ids', () => {
  it('ids made in one millisecond sort in the order they were made, past every width of the counter', () => {
    const now = Date.now()
    // 1,400 ids cross the counter's widths of one, two and three base-36 digits (36 and 1,296).
    const made = Array.from({ length: 1400 }, () => newSessionId(now))
    expect([...made].sort()).toEqual(made)
    expect(new Set(made).size).toBe(made.length)
  })

  it('ids of later milliseconds sort after earlier ones', () => {
    const earlier = newSessionId(1_000_000)
    const later = newSessionId(1_000_001)
    expect([later, earlier].sort()).toEqual([earlier, later])
  })

  it("an id's tail is its process's random tag and its counter, with nothing between them, whatever the counter's width", () => {
    const layout = /^[0-9a-z]{9}-([1-9a-z])([0-9a-f]{12})([0-9a-z]+)$/
    const parts = (id: string) => {
      const [, width, tag, counter] = layout.exec(id) ?? []
      expect(counter?.length, id).toBe(Number.parseInt(width ?? '', 36))
      return { tag, counter: Number.parseInt(counter!, 36) }
    }
    const first = parts(newSessionId())
    // Make ids until the counter is one digit wider (at most 36^3 of them): the tag is still the same characters, right before it.
    let next = first
    while (Math.floor(Math.log(next.counter) / Math.log(36)) === Math.floor(Math.log(first.counter) / Math.log(36))) next = parts(newSessionId())
    expect(next.tag).toBe(first.tag)
  })
})
