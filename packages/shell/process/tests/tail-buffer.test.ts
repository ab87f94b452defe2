import { describe, expect, it } from 'vitest'
import { TailBuffer } from '@dsh/process'

describe('the stderr tail', () => {
  it('keeps the last characters and marks the cut', () => {
    const tail = new TailBuffer(10)
    tail.push('0123456789')
    expect(tail.toString()).toBe('0123456789')
    tail.push('abc\n')
    expect(tail.toString()).toBe('…456789abc')
  })
})
