import { afterEach, describe, expect, it } from 'vitest'
import { createHarness, type Harness } from '@dsh/testkit/harness'
import type { SubagentRunInfo } from '@dsh/subagent'
import { columnWidth, padColumns, truncateColumns } from '@dsh/subagent'
import { treeLines } from '../src/progress/render.js'
import { ProgressTracker } from '../src/progress/tracker.js'

let harness: Harness | undefined
afterEach(async () => {
  await harness?.dispose()
  harness = undefined
})

describe('text measured in terminal columns', () => {
  it('a CJK character takes two columns, a combining mark none, a flag is one grapheme of two', () => {
    expect(columnWidth('漢')).toBe(2)
    expect(columnWidth('e\u0301')).toBe(1)
    expect(columnWidth('🇫🇷')).toBe(2)
    expect(columnWidth('\x1b[31mred\x1b[0m')).toBe(3)
  })

  it('cuts by columns and never splits a grapheme: the result plus its ellipsis fits', () => {
    const cut = truncateColumns('漢字漢字漢字', 7)
    expect(cut).toBe('漢字漢…')
    expect(columnWidth(cut)).toBeLessThanOrEqual(7)
    expect(truncateColumns('🇫🇷🇫🇷🇫🇷', 5)).toBe('🇫🇷🇫🇷…')
    expect(truncateColumns('short', 10)).toBe('short')
    expect(padColumns('漢', 4)).toBe('漢  ')
  })

  it('a tree line with a wide label is cut to the terminal width in columns, so it never wraps', async () => {
    harness = await createHarness({})
    const root = await harness.agent()
    const tracker = new ProgressTracker(harness.ctx, root, () => 1_000)
    const run: SubagentRunInfo = { runId: 'r', provider: 'spawn', id: 'child-1', local: false, parentId: root.id, label: '漢'.repeat(60) }
    harness.ctx.emit('subagent/start', run)
    for (const line of treeLines(tracker, 2_000, 50)) expect(columnWidth(line)).toBeLessThanOrEqual(50)
    expect(treeLines(tracker, 2_000, 50).find((line) => line.includes('漢'))!.endsWith('…')).toBe(true)
  })
})
