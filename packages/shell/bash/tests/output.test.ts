import { describe, expect, it } from 'vitest'
import { BoundedOutput } from '@dsh/bash'

describe('BoundedOutput', () => {
  it('keeps everything while under the bound', () => {
    const output = new BoundedOutput(4, 6)
    output.append('abc')
    output.append('defg')
    expect(output.text()).toBe('abcdefg')
    expect(output.dropped).toBe(0)
  })

  it('keeps head and tail, drops the middle and says how much', () => {
    const output = new BoundedOutput(4, 6)
    for (const chunk of ['head', 'MIDDLE-1', 'MIDDLE-2', 'tail!!']) output.append(chunk)
    expect(output.length).toBe(26)
    expect(output.dropped).toBe(16)
    expect(output.text()).toBe('head\n[... 16 characters of output dropped ...]\ntail!!')
  })

  it('an incremental reader that keeps up sees every character; one that falls behind is told what it missed', () => {
    const output = new BoundedOutput(2, 4)
    let cursor = 0
    let seen = ''
    for (const chunk of ['ab', 'cd', 'ef', 'gh']) {
      output.append(chunk)
      const slice = output.read(cursor)
      expect(slice.skipped).toBe(0)
      seen += slice.text
      cursor = slice.next
    }
    expect(seen).toBe('abcdefgh')
    output.append('0123456789')
    const behind = output.read(cursor)
    expect(behind).toEqual({ text: '\n[... 6 characters of output dropped ...]\n6789', next: 18, skipped: 6 })
    expect(output.read(behind.next)).toEqual({ text: '', next: 18, skipped: 0 })
  })

  it('a read that starts in the head continues across the dropped middle', () => {
    const output = new BoundedOutput(3, 3)
    output.append('abcdefghij')
    expect(output.read(1)).toEqual({ text: 'bc\n[... 4 characters of output dropped ...]\nhij', next: 10, skipped: 4 })
  })
})
