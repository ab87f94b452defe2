import { afterEach, describe, expect, it } from 'vitest'
import { createHarness, type Harness } from '@dsh/testkit/harness'
import type { SubagentProgress, SubagentRunInfo } from '@dsh/subagent'
import { lifecycleLine, treeLines } from '../src/progress/render.js'
import { ProgressTracker, type ProgressChange } from '../src/progress/tracker.js'

let harness: Harness | undefined
afterEach(async () => {
  await harness?.dispose()
  harness = undefined
})

/** A tracker over a real root agent, fed the subagent events a remote provider's run produces. */
async function tracked() {
  harness = await createHarness({})
  const root = await harness.agent()
  const tracker = new ProgressTracker(harness.ctx, root, () => 1_000)
  const changes: ProgressChange[] = []
  tracker.onChange((change) => changes.push(change))
  const run: SubagentRunInfo = { runId: 'run-1', provider: 'codex', id: 'codex:thread-1', local: false, parentId: root.id, label: 'remote helper', callId: 'call_1' }
  let seq = 0
  const emit = {
    start: () => harness!.ctx.emit('subagent/start', run),
    progress: (...updates: SubagentProgress[]) => harness!.ctx.emit('subagent/progress', { ...run, seq: ++seq, updates }),
    end: () => harness!.ctx.emit('subagent/end', { ...run, stopReason: 'completed', usage: { inputTokens: 4200, outputTokens: 90, cachedInputTokens: 0 } }),
  }
  return { tracker, changes, emit, child: () => tracker.nodes.get(run.id)! }
}

describe('the live tree\'s view of a child', () => {
  it('a helper\'s child is named by its helper and provider, in the tree and after the words of its plain start line', async () => {
    harness = await createHarness({})
    const root = await harness.agent()
    const tracker = new ProgressTracker(harness.ctx, root, () => 1_000)
    const changes: ProgressChange[] = []
    tracker.onChange((change) => changes.push(change))
    harness.ctx.emit('subagent/start', { runId: 'run-1', provider: 'spawn', id: 'child-1', local: false, parentId: root.id, label: 'review it', helper: 'reviewer' })
    expect(treeLines(tracker, 2_000)[1]).toBe('└─ … reviewer (spawn) child-1 "review it"  running 1.0s')
    expect(changes.map((change) => lifecycleLine(change, 2_000)).filter((line) => line !== undefined)).toEqual([`[subagent] start spawn child-1 "review it" [helper reviewer] (parent ${root.id})`])
  })

  it('a remote child shows its tool, writing, status and tokens from its progress alone', async () => {
    const { tracker, emit, child } = await tracked()
    emit.start()
    emit.progress({ kind: 'text', text: 'Looking.' }, { kind: 'usage', usage: { inputTokens: 1500, outputTokens: 20, cachedInputTokens: 0 } })
    expect(child()).toMatchObject({ activity: 'writing', usage: { inputTokens: 1500 } })
    emit.progress({ kind: 'tool-start', callId: 't1', name: 'shell', args: '{"command":"ls -la"}' })
    expect(child().activity).toBe('shell ls -la')
    const line = treeLines(tracker, 2_000).find((each) => each.includes('"remote helper"'))!
    expect(line).toBe('└─ … codex thread-1 "remote helper"  running 1.0s  1.5k in 20 out  shell ls -la')
    emit.progress({ kind: 'status', text: 'planning step 2' })
    expect(child().activity).toBe('planning step 2')
  })

  it('with parallel tools, the one still running is the activity; an ended child shows its usage and no activity', async () => {
    const { emit, child, tracker } = await tracked()
    emit.start()
    emit.progress({ kind: 'tool-start', callId: 'a', name: 'read', args: 'a.txt' }, { kind: 'tool-start', callId: 'b', name: 'grep', args: '{"pattern":"x","path":"."}' })
    expect(child().activity).toBe('grep {"pattern":"x","path":"."}')
    emit.progress({ kind: 'tool-end', callId: 'b', name: 'grep', ok: true })
    expect(child().activity).toBe('read a.txt')
    emit.progress({ kind: 'tool-end', callId: 'a', name: 'read', ok: false, detail: 'missing' })
    expect(child().activity).toBe('read failed')
    emit.end()
    expect(child()).toMatchObject({ state: 'done', usage: { inputTokens: 4200, outputTokens: 90 } })
    expect(child().activity).toBeUndefined()
    expect(treeLines(tracker, 2_000).find((each) => each.includes('"remote helper"'))).toBe('└─ ✓ codex thread-1 "remote helper"  done 0.0s  4.2k in 90 out')
  })

  it('plain output has one line per tool call and none for text, status or usage', async () => {
    const { changes, emit } = await tracked()
    emit.start()
    emit.progress({ kind: 'text', text: 'a' }, { kind: 'tool-start', callId: 't1', name: 'shell', args: '{"command":"ls"}' }, { kind: 'text', text: 'b' })
    emit.progress({ kind: 'tool-end', callId: 't1', name: 'shell', ok: true }, { kind: 'status', text: 's' }, { kind: 'usage', usage: { inputTokens: 1, outputTokens: 1, cachedInputTokens: 0 } })
    emit.progress({ kind: 'tool-start', callId: 't2', name: 'shell', args: '{"command":"pwd"}' })
    emit.end()
    const lines = changes.map((change) => lifecycleLine(change, 2_000)).filter((line) => line !== undefined)
    expect(lines).toEqual([
      expect.stringMatching(/^\[subagent\] start codex codex:thread-1 "remote helper" \(parent \S+\)$/),
      '[subagent] tool codex codex:thread-1 "remote helper" shell {"command":"ls"}',
      '[subagent] tool codex codex:thread-1 "remote helper" shell {"command":"pwd"}',
      '[subagent] end codex codex:thread-1 completed after 0.0s',
    ])
  })

  it('a transport that never ends its tool calls cannot grow what the tree remembers', async () => {
    const { emit, child } = await tracked()
    emit.start()
    for (let i = 0; i < 1_000; i++) emit.progress({ kind: 'tool-start', callId: `c${i}`, name: 'shell' })
    expect(child().openTools.size).toBe(32)
    expect(child().activity).toBe('shell')
  })

  it('a child\'s label and diagnostic reach the terminal without their control characters', async () => {
    harness = await createHarness({})
    const root = await harness.agent()
    const tracker = new ProgressTracker(harness.ctx, root, () => 1_000)
    const run: SubagentRunInfo = { runId: 'run-x', provider: 'spawn', id: 'child-x', local: true, parentId: root.id, label: 'evil\u001b[2J\u001b]0;owned\u0007' }
    harness.ctx.emit('subagent/start', run)
    harness.ctx.emit('subagent/end', { ...run, stopReason: 'error', diagnostic: 'crashed\u001b[31m red' })
    const shown = [...treeLines(tracker, 2_000), lifecycleLine({ kind: 'end', node: tracker.nodes.get('child-x')! } as ProgressChange, 2_000) ?? ''].join('\n')
    expect(shown).toContain('evil')
    expect(shown).toContain('crashed')
    expect(shown).not.toMatch(/[\u0000-\u0008\u000b-\u001f\u007f]/)
  })

  it('tool arguments, tool names and status lines from a child cannot move the cursor or split a tree line', async () => {
    const { tracker, emit, child } = await tracked()
    emit.start()
    // JSON escapes survive a summary as plain text; parsing them for display must not revive them.
    emit.progress({ kind: 'tool-start', callId: 't1', name: 'bash', args: JSON.stringify({ command: '\u001b]0;owned\u0007\u001b[2J ls' }) })
    const withArgs = treeLines(tracker, 2_000).join('\n')
    expect(child().activity).toContain('ls')
    emit.progress({ kind: 'tool-start', callId: 't2', name: 'two\nlines', args: '{"a":1}' }, { kind: 'status', text: 'first\nsecond\r\u001b[A' })
    const lines = [withArgs, ...treeLines(tracker, 2_000)]
    for (const line of lines.join('\n').split('\n')) expect(line).not.toMatch(/[\u0000-\u0008\u000b-\u001f\u007f]/)
    expect(treeLines(tracker, 2_000).length).toBe(lines.length - 1)
  })

  it('a delegation queued for a slot is in the tree as queued until it starts; a budget event is one note on the root', async () => {
    harness = await createHarness({})
    const root = await harness.agent()
    const tracker = new ProgressTracker(harness.ctx, root, () => 1_000)
    const changes: ProgressChange[] = []
    tracker.onChange((change) => changes.push(change))
    harness.ctx.emit('subagent/queued', { parentId: root.id, provider: 'spawn', callId: 'call_7', label: 'part 7', queued: true })
    expect(treeLines(tracker, 2_000)[1]).toBe('└─ … spawn "part 7"  queued 1.0s')
    harness.ctx.emit('subagent/queued', { parentId: root.id, provider: 'spawn', callId: 'call_7', label: 'part 7', queued: false })
    expect(treeLines(tracker, 2_000)).toHaveLength(1)
    harness.ctx.emit('subagent/budget', { rootId: root.id, kind: 'warning', limit: 'outputTokens', used: 80, bound: 100, text: 'budget warning: the delegation tree has used 80% of its output-token budget (80 of 100 output tokens)' })
    expect(changes.map((change) => lifecycleLine(change, 2_000)).filter((line) => line !== undefined)).toEqual([
      `[subagent] queued spawn "part 7" (parent ${root.id}): its tree is at its cap`,
      '[budget] budget warning: the delegation tree has used 80% of its output-token budget (80 of 100 output tokens)',
    ])
  })
})

