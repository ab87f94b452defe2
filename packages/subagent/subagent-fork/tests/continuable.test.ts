import { mkdtemp } from 'node:fs/promises'
import { tmpdir } from 'node:os'
import { join } from 'node:path'
import { afterEach, describe, expect, it } from 'vitest'
import { createDelegationHarness, turnEnds, type DelegationHarness, cleanUp } from '@dsh/testkit/delegation'
import { text, textOf, type LlmRequest } from '@dsh/llm'
import type { Agent } from '@dsh/agent'
import { ForkPlugin } from '@dsh/subagent-fork'

const SCRIPT = [
  { when: { prompt: '^review' }, reply: [{ text: 'review one' }, { text: 'review two' }] },
  { reply: Array.from({ length: 6 }, (_, index) => ({ text: `parent ${index + 1}` })) },
]

let harness: DelegationHarness | undefined
let dir: string | undefined
afterEach(async () => {
  await cleanUp(harness, dir)
  harness = dir = undefined
})

async function start(sessionDir: string): Promise<{ h: DelegationHarness; requests: LlmRequest[] }> {
  const h = (harness = await createDelegationHarness({ script: SCRIPT, sessionDir, plugins: [[ForkPlugin, {}]] }))
  return { h, requests: h.requests }
}


const texts = (request: LlmRequest) => request.messages.toArray().map((message) => textOf(message.content.filter((block) => block.type === 'text')))

describe('continuable fork children', () => {
  it('a continuable fork child started outside a turn is seeded with the completed turns, and keeps them after a restart', async () => {
    dir = await mkdtemp(join(tmpdir(), 'dsh-fork-continuable-'))
    const first = await start(dir)
    const parent = await first.h.agent()
    await parent.followup('earlier work')
    const { childId } = await first.h.ctx.subagents.startContinuable({ provider: 'fork', label: 'review', request: { prompt: [text('review it')], parent }, signal: new AbortController().signal })
    const child = first.h.ctx.agents.get(childId)!
    expect(child.session.seedLength).toBeGreaterThan(0)
    expect(child.session.header.descriptor).toMatchObject({ provider: 'fork', label: 'review' })
    await turnEnds(parent, 2)
    expect(texts(first.requests.find((r) => r.origin.sessionId === childId)!)).toEqual(['earlier work', 'parent 1', 'review it'])
    const parentId = parent.id
    await first.h.dispose()

    const second = await start(dir)
    const resumed = await second.h.ctx.agents.create({ sessionId: parentId })
    await second.h.ctx.subagents.followup(resumed, childId, 'review again')
    const again = second.h.ctx.agents.get(childId)!
    await turnEnds(again, 2)
    expect(texts(second.requests.find((r) => r.origin.sessionId === childId)!)).toEqual(['earlier work', 'parent 1', 'review it', 'review one', 'review again'])
    const answers = again.session.ownEvents().flatMap((event) => (event.type === 'assistant/message' ? [textOf(event.message.content)] : []))
    expect(answers).toEqual(['review one', 'review two'])
  })
})
