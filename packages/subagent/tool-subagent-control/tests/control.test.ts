import { mkdtemp, readFile, readdir } from 'node:fs/promises'
import { tmpdir } from 'node:os'
import { join } from 'node:path'
import { afterEach, describe, expect, it } from 'vitest'
import type { HarnessOptions } from '@dsh/testkit/harness'
import { createDelegationHarness, turnEnds, type DelegationHarness, cleanUp } from '@dsh/testkit/delegation'
import { text, textOf } from '@dsh/llm'
import type { Agent } from '@dsh/agent'
import { SpawnPlugin } from '@dsh/subagent-spawn'
import SubagentReportPlugin from '@dsh/tool-subagent-report'
import SubagentControlPlugin, { resolveChild } from '@dsh/tool-subagent-control'

let harness: DelegationHarness | undefined
let dir: string | undefined
afterEach(async () => {
  await cleanUp(harness, dir)
  harness = dir = undefined
})

async function start(script: HarnessOptions['script'], sessionDir?: string): Promise<DelegationHarness> {
  dir = sessionDir ?? (await mkdtemp(join(tmpdir(), 'dsh-control-')))
  return (harness = await createDelegationHarness({ script, sessionDir: dir, plugins: [[SpawnPlugin, {}], [SubagentControlPlugin, {}], [SubagentReportPlugin, {}]] }))
}

async function call(h: DelegationHarness, agent: Agent, name: string, args: Record<string, unknown>) {
  const { result } = await h.ctx.tools.execute({ type: 'tool-call', id: `call-${name}`, name, args }, { signal: new AbortController().signal, callId: `call-${name}`, agent })
  return { text: textOf(result.content), isError: result.isError === true }
}


const signal = () => new AbortController().signal

describe('subagent control tools', () => {
  it('send_message queues a turn for the caller\'s own child and refuses anyone else\'s or an unknown id', async () => {
    const h = await start([
      { when: { prompt: '^research' }, reply: [{ text: 'one' }, { text: 'two' }] },
      { reply: [{ text: 'ack' }, { text: 'ack' }, { text: 'ack' }] },
    ])
    const parent = await h.agent()
    const stranger = await h.agent()
    const { childId } = await h.ctx.subagents.startContinuable({ provider: 'spawn', label: 'research', request: { prompt: [text('research')], parent }, signal: signal() })
    await turnEnds(parent, 1)
    const child = h.ctx.agents.get(childId)!

    expect(await call(h, stranger, 'send_message', { subagent_id: childId, message: 'hi' })).toEqual({ isError: true, text: expect.stringMatching(/^message not delivered: .*not the parent/) })
    expect(await call(h, parent, 'send_message', { subagent_id: 'nobody', message: 'hi' })).toEqual({ isError: true, text: expect.stringMatching(/^message not delivered: subagent nobody cannot be reached/) })
    expect(child.session.ownEvents().filter((e) => e.type === 'turn/start')).toHaveLength(1)

    expect(await call(h, parent, 'send_message', { subagent_id: childId, message: 'more' })).toEqual({ isError: false, text: `message queued as the next turn for subagent ${childId}` })
    await turnEnds(child, 2)
    expect(await call(h, parent, 'list_agents', {})).toEqual({ isError: false, text: `${childId} [idle] — research (spawn, 2 turns)` })
    expect(await call(h, stranger, 'list_agents', { scope: 'descendants' })).toEqual({ isError: false, text: '(no subagents)' })
  })

  it('interrupt_agent is for ancestors only; a grandparent may stop a grandchild', async () => {
    const h = await start([
      { when: { prompt: '^middle' }, reply: [{ text: 'middle done' }, { text: 'ack' }, { text: 'ack' }] },
      { when: { prompt: '^slow' }, reply: [{ delay_ms: 60_000, text: 'never' }] },
      { reply: [{ text: 'ack' }, { text: 'ack' }, { text: 'ack' }] },
    ])
    const root = await h.agent()
    const stranger = await h.agent()
    const { childId: middleId } = await h.ctx.subagents.startContinuable({ provider: 'spawn', label: 'middle', request: { prompt: [text('middle')], parent: root }, signal: signal() })
    const middle = h.ctx.agents.get(middleId)!
    const { childId: leafId } = await h.ctx.subagents.startContinuable({ provider: 'spawn', label: 'slow', request: { prompt: [text('slow')], parent: middle }, signal: signal() })
    const leaf = h.ctx.agents.get(leafId)!

    expect(await call(h, stranger, 'interrupt_agent', { agent_id: leafId })).toMatchObject({ isError: true, text: expect.stringContaining('not an ancestor') })
    expect(await call(h, leaf, 'interrupt_agent', { agent_id: leafId })).toMatchObject({ isError: true })
    expect(await call(h, root, 'interrupt_agent', { agent_id: leafId })).toEqual({ isError: false, text: `interrupt requested for agent ${leafId}` })
    await turnEnds(leaf, 1)
    expect(leaf.session.ownEvents().find((e) => e.type === 'turn/end')).toMatchObject({ reason: 'aborted' })
    const listed = await call(h, root, 'list_agents', { scope: 'descendants' })
    expect(listed.text.split('\n')).toEqual([
      expect.stringMatching(new RegExp(`^${middleId} \\[(idle|running)\\] — middle .* parent=${root.id} depth=1$`)),
      expect.stringMatching(new RegExp(`^${leafId} \\[(idle|running)\\] — slow .* parent=${middleId} depth=2$`)),
    ])
  })

  it('report reaches only continuable children and delivers to the parent at its next step', async () => {
    const h = await start([
      { when: { prompt: '^research' }, reply: [{ call: { tool: 'report', args: { output: 'halfway there' } } }, { text: 'all done' }] },
      { reply: [{ text: 'ack' }, { text: 'ack' }, { text: 'ack' }, { text: 'ack' }] },
    ])
    const parent = await h.agent()
    expect(h.ctx.tools.list(parent.id)).not.toContain('report')
    const { childId } = await h.ctx.subagents.startContinuable({ provider: 'spawn', label: 'research', request: { prompt: [text('research')], parent, toolFilter: { allow: [] } }, signal: signal() })
    const child = h.ctx.agents.get(childId)!
    // The filter allows nothing, yet the report tool survives it.
    expect(h.ctx.tools.list(childId)).toEqual(['report'])
    await turnEnds(child, 1)
    await h.ctx.agents.get(parent.id)!.whenIdle()
    const seen = parent.session.ownEvents().flatMap((e) => (e.type === 'user/message' ? [textOf(e.message.content)] : [])).join('\n')
    expect(seen).toContain(`Background subagent ${childId} reported:\nhalfway there`)
    expect(seen).toContain('all done')
    const toolResult = child.session.ownEvents().find((e) => e.type === 'tool/result')
    expect(toolResult?.type === 'tool/result' && textOf(toolResult.result.content)).toMatch(/^report accepted by the agent that started you as message msg-/)
  })

  it('interrupt_agent checks a child that is not in memory against its stored lineage; an unknown id is named; nothing is created', async () => {
    const script: HarnessOptions['script'] = [
      { when: { prompt: '^research' }, reply: [{ text: 'one' }] },
      { reply: [{ text: 'ack' }, { text: 'ack' }] },
    ]
    const first = await start(script)
    const parent = await first.agent()
    const { childId } = await first.ctx.subagents.startContinuable({ provider: 'spawn', label: 'research', request: { prompt: [text('research')], parent }, signal: signal() })
    await turnEnds(parent, 1)
    const kept = dir!
    await first.dispose()
    harness = undefined
    const files = await readdir(kept)
    const child = await readFile(join(kept, `${childId}.jsonl`), 'utf8')

    const h = await start(script, kept)
    const stranger = await h.agent()
    const resumedParent = await h.ctx.agents.create({ sessionId: parent.id })
    expect(await call(h, stranger, 'interrupt_agent', { agent_id: childId })).toEqual({ isError: true, text: expect.stringMatching(new RegExp(`^interrupt refused: agent ${stranger.id} is not an ancestor of subagent ${childId}`)) })
    expect(await call(h, stranger, 'interrupt_agent', { agent_id: 'no-such-agent' })).toEqual({ isError: true, text: expect.stringMatching(/^interrupt refused: subagent no-such-agent cannot be reached: there is no such subagent/) })
    await expect(h.ctx.subagents.interrupt('no-such-agent', { kind: 'user', parentSessionId: parent.id })).rejects.toMatchObject({ code: 'NOT_RESUMABLE' })
    await expect(h.ctx.subagents.interrupt(childId, { kind: 'user', parentSessionId: stranger.id })).rejects.toMatchObject({ code: 'UNAUTHORIZED' })
    // Its parent may: the child is idle and not in memory, so there is nothing to stop.
    expect(await call(h, resumedParent, 'interrupt_agent', { agent_id: childId })).toEqual({ isError: false, text: `interrupt requested for agent ${childId}` })
    expect(h.ctx.agents.get(childId)).toBeUndefined()
    expect((await readdir(kept)).filter((name) => name.endsWith('.jsonl') && !name.startsWith(stranger.id))).toEqual(files)
    expect(await readFile(join(kept, `${childId}.jsonl`), 'utf8')).toBe(child)
  })

  it('a label several children share is AMBIGUOUS_CHILD listing their ids, and nothing is delivered', async () => {
    const h = await start([
      { when: { prompt: '^research' }, reply: [{ text: 'one' }, { text: 'two' }] },
      { reply: [{ text: 'ack' }, { text: 'ack' }, { text: 'ack' }] },
    ])
    const parent = await h.agent()
    const first = await h.ctx.subagents.startContinuable({ provider: 'spawn', label: 'research', request: { prompt: [text('research a')], parent }, signal: signal() })
    const second = await h.ctx.subagents.startContinuable({ provider: 'spawn', label: 'research', request: { prompt: [text('research b')], parent }, signal: signal() })
    await turnEnds(h.ctx.agents.get(first.childId)!, 1)
    await turnEnds(h.ctx.agents.get(second.childId)!, 1)
    await expect(resolveChild(h.ctx, parent.id, 'research', signal())).rejects.toMatchObject({ code: 'AMBIGUOUS_CHILD' })
    const refused = await call(h, parent, 'send_message', { subagent_id: 'research', message: 'which of you?' })
    expect(refused).toEqual({ isError: true, text: expect.stringContaining('2 of your subagents are labelled "research"') })
    expect(refused.text).toContain(first.childId)
    expect(refused.text).toContain(second.childId)
    for (const id of [first.childId, second.childId]) expect(h.ctx.agents.get(id)!.session.ownEvents().filter((e) => e.type === 'turn/start')).toHaveLength(1)
  })
})
