/**
 * Children that never started, read from what the real tools record: `@dsh/tool-subagent`
 * delegating under a tree budget of one child, so the second foreground delegation and a
 * background one are refused before their first step; only the model is scripted. The
 * wording they record is what `unstarted.ts` reads, so a change of it fails here.
 */
import { readFileSync, writeFileSync } from 'node:fs'
import { join } from 'node:path'
import { afterEach, describe, expect, it } from 'vitest'
import { SpawnPlugin } from '@dsh/subagent-spawn'
import { TaskToolsPlugin } from '@dsh/tool-tasks'
import { SubagentToolPlugin } from '@dsh/tool-subagent'
import { createDelegationHarness, type DelegationHarness } from '@dsh/testkit/delegation'
import { SessionIndex, Views } from '@dsh/ui-server'
import type { NodeView } from '../src/views.js'
import { askedOrder, byAsking, unstartedChildren } from '@dsh/ui-server/delegations'
import type { SessionEvent } from '@dsh/session'

let harness: DelegationHarness | undefined
let index: SessionIndex | undefined
afterEach(async () => {
  index?.close()
  await harness?.dispose()
  harness = index = undefined
})

const byLabel = (tree: NodeView | undefined, label: string) => tree?.children.find((child) => child.label === label)

describe('children that never started', () => {
  it('a delegation a budget refused before its child started, foreground or background, is a not-started node with the budget\'s words; the prompt heads the run', async () => {
    const root = await refusedRun()
    index = new SessionIndex(harness!.dir!)
    await index.open()
    const views = new Views(index)
    const tree = views.tree(root.id)
    expect(tree?.children.map((child) => [child.label, child.state])).toEqual([
      ['first', 'completed'],
      ['refused', 'not-started'],
      ['too late', 'not-started'],
    ])
    expect(byLabel(tree, 'refused')).toMatchObject({ id: expect.stringMatching(new RegExp(`^${root.id}/`)), call: expect.any(String), diagnostic: expect.stringMatching(/^budget: the delegation tree's children budget of 1 is spent/) })
    expect(byLabel(tree, 'too late')).toMatchObject({ task: 'subagent-1', diagnostic: expect.stringMatching(/^budget: the delegation tree's children budget of 1 is spent/) })
    // The list of runs: the first line of the prompt, as it was typed (the page shows it as text), and every node below the root counted.
    expect(views.runs()).toEqual([expect.objectContaining({ id: root.id, prompt: 'check <b>the</b> \u001b[31mplan', children: 3 })])
    // What dsh sessions tree reads: the same two, with their calls, tools and reasons.
    const events = index.get(root.id)!.events
    const started = new Set(index.all().flatMap((session) => (session.header.toolCallId === undefined ? [] : [session.header.toolCallId])))
    expect(unstartedChildren(events, started, false)).toEqual([
      expect.objectContaining({ tool: 'subagent', label: 'refused', state: 'not-started', reason: expect.stringMatching(/^budget: the delegation tree's children budget of 1 is spent/) }),
      expect.objectContaining({ tool: 'subagent', label: 'too late', taskId: 'subagent-1', state: 'not-started', reason: expect.stringMatching(/^budget: /) }),
    ])
  })

  it('children are listed in the order their parent asked for them, however the times of their results race', async () => {
    const root = await refusedRun()
    await root.dispose() // its file complete before it is edited
    // The calls of one reply run together: record the foreground refusal as heard after the background start.
    const file = join(harness!.dir!, `${root.id}.jsonl`)
    const lines = readFileSync(file, 'utf8').split('\n')
    const last = Math.max(...lines.filter(Boolean).map((line) => (JSON.parse(line) as { ts?: number }).ts ?? 0))
    const refusal = lines.findIndex((line) => line.includes('"tool/result"') && line.includes('the subagent could not be started'))
    expect(refusal).toBeGreaterThan(-1)
    lines[refusal] = JSON.stringify({ ...JSON.parse(lines[refusal]!), ts: last + 1000 })
    writeFileSync(file, lines.join('\n'))
    index = new SessionIndex(harness!.dir!)
    await index.open()
    expect(new Views(index).tree(root.id)?.children.map((child) => child.label)).toEqual(['first', 'refused', 'too late'])
    expect(unstartedChildren(index.get(root.id)!.events, new Set(), false).map((child) => child.label)).toEqual(['refused', 'too late'])
  })
})

/** A root that delegates three children under a tree budget of one: the second and the third (in the background) are refused. */
async function refusedRun() {
  harness = await createDelegationHarness({
    subagents: { tree: { budget: { children: 1 } } },
    script: [
      { when: { depth: 1 }, reply: [{ text: 'done' }] },
      {
        when: { depth: 0 },
        reply: [
          { call: { tool: 'subagent', args: { description: 'first', prompt: 'one' } } },
          { call: { tool: 'subagent', args: { description: 'refused', prompt: 'two' } } },
          { call: { tool: 'subagent', args: { description: 'too late', prompt: 'three', run_in_background: true } } },
          { call: { tool: 'task_output', args: { task_id: 'subagent-1', wait: true } } },
          { text: 'root done' },
        ],
      },
    ] as never,
    plugins: [[SpawnPlugin, {}], [SubagentToolPlugin, { provider: 'spawn' }], [TaskToolsPlugin, {}]],
  })
  const root = await harness.agent({ meta: { origin: 'cli' } })
  await root.followup('check <b>the</b> \u001b[31mplan\nand more lines')
  return root
}

describe('the order a parent asked for its children', () => {
  const call = (id: string, ts: number) => ({ type: 'tool/call', ts, call: { id, name: 'subagent', args: {} } }) as unknown as SessionEvent

  it('a call id a later reply uses again places each child by the call made by its own time', () => {
    // Two replies from a provider that sends no ids: each numbers its calls from call_0.
    const order = byAsking(askedOrder([call('call_0', 100), call('call_1', 100), call('call_0', 200), call('call_1', 200)]))
    const children = [
      { name: 'second reply, second call', call: 'call_1', at: 205 },
      { name: 'second reply, first call', call: 'call_0', at: 210 },
      { name: 'first reply, second call', call: 'call_1', at: 150 },
      { name: 'first reply, first call', call: 'call_0', at: 120 },
    ]
    expect(children.sort(order).map((child) => child.name)).toEqual(['first reply, first call', 'first reply, second call', 'second reply, first call', 'second reply, second call'])
  })

  it('a child no call asked for goes by its own time, after the calls of the same moment, and one whose time is unknown goes last', () => {
    const order = byAsking(askedOrder([call('a', 100), call('b', 100)]))
    const children = [{ name: 'unknown time', at: Number.NaN }, { name: 'b', call: 'b', at: 130 }, { name: 'no call', at: 100 }, { name: 'a', call: 'a', at: 140 }, { name: 'earlier', at: 50 }]
    expect(children.sort(order).map((child) => child.name)).toEqual(['earlier', 'a', 'b', 'no call', 'unknown time'])
  })
})
