/**
 * The descendants a dsh worker names in a status update's `metadata.dsh.descendants`: read
 * whether or not anybody listens to progress (the parent's hooks hear them), each entry
 * checked, one of the wrong shape dropped with a reason and the rest kept.
 */
import { describe, expect, it } from 'vitest'
import type { ProgressReporter, ReportedDescendant } from '@dsh/subagent'
import { A2aProgressReader } from '../src/progress.js'

/** Nobody listens to progress: what the reader reports goes nowhere. */
const silent: ProgressReporter = { reporting: false, report: () => {} }

describe("a2a: a worker's descendants", () => {
  it('well-formed reports are told in order with nobody listening to progress; malformed ones are dropped with a reason', () => {
    const dropped: string[] = []
    const told: ReportedDescendant[] = []
    const reader = new A2aProgressReader(silent, (reason) => dropped.push(reason))
    const start = { event: 'start', id: 'g1', path: ['spawn "grand"'] }
    const end = { event: 'end', id: 'g1', path: ['spawn "grand"'], helper: 'grander', stopReason: 'completed' }
    reader.descendantsIn({ dsh: { descendants: [start, { event: 'start', id: 'g2', path: 'spawn' }, { event: 'end', id: '', path: ['x'] }, end] } }, (reported) => told.push(reported))
    expect(told).toEqual([start, end])
    expect(dropped).toHaveLength(2)
    expect(dropped[0]).toMatch(/^a metadata\.dsh\.descendants entry that is not \{ event: start\|end, id, path/)
    reader.descendantsIn({ dsh: { descendants: { event: 'start' } } }, (reported) => told.push(reported))
    expect(dropped.at(-1)).toBe('a status update whose metadata.dsh.descendants is not a list')
    // A status update without them names none, and drops nothing.
    reader.descendantsIn({ dsh: { progress: [] } }, (reported) => told.push(reported))
    reader.descendantsIn(undefined, (reported) => told.push(reported))
    expect(told).toHaveLength(2)
    expect(dropped).toHaveLength(3)
  })
})
