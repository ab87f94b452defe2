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
})
