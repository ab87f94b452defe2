import { afterEach, describe, expect, it, vi } from 'vitest'

const OriginalSegmenter = Intl.Segmenter
afterEach(() => {
  Intl.Segmenter = OriginalSegmenter
})

describe('column measurement', () => {
  it('builds no grapheme segmenter when it loads or measures printable ASCII, one on the first wide text', async () => {
    let made = 0
    Intl.Segmenter = class extends OriginalSegmenter {
      constructor(...args: ConstructorParameters<typeof Intl.Segmenter>) {
        super(...args)
        made++
      }
    }
    vi.resetModules()
    const { columnWidth, truncateColumns } = await import('../src/progress/columns.js')
    expect(columnWidth('a plain line')).toBe(12)
    expect(truncateColumns('a plain line', 5)).toBe('a pl…')
    expect(made).toBe(0)
    expect(columnWidth('漢字')).toBe(4)
    expect(columnWidth('漢字')).toBe(4)
    expect(made).toBe(1)
  })

  it('counts graphemes as a terminal draws them: emoji sequences two, zero-width and controls none', async () => {
    const { columnWidth } = await import('../src/progress/columns.js')
    expect(columnWidth('👨‍👩‍👧')).toBe(2)
    expect(columnWidth('👍🏽')).toBe(2)
    expect(columnWidth('❤️')).toBe(2)
    expect(columnWidth('a\u200bb')).toBe(2)
    expect(columnWidth('한국어')).toBe(6)
    expect(columnWidth('ｱ')).toBe(1)
    expect(columnWidth('\x1b]8;;https://example.test\x07link\x1b]8;;\x07')).toBe(4)
  })
})
