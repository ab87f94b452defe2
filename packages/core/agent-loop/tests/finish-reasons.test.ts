import { afterEach, describe, expect, it } from 'vitest'
import { createHarness, type Harness } from '@dsh/testkit/harness'
import { textOf } from '@dsh/llm'

let harness: Harness
afterEach(async () => {
  await harness?.dispose()
})

function toolResults(harness: Harness, agentId: string) {
  const agent = harness.ctx.agents.get(agentId)!
  return agent.session.events().flatMap((event) => (event.type === 'tool/result' ? [{ text: textOf(event.result.content), isError: event.result.isError === true }] : []))
}

describe('finishes that end a turn by themselves', () => {
  it('a content-filter finish ends the turn refusal, keeping the partial text', async () => {
    harness = await createHarness({ script: [{ reply: [{ text: 'I cannot help with', finish: 'content-filter' }, { text: 'never asked' }] }] })
    const agent = await harness.agent()
    const result = await agent.followup('go')
    expect(result).toMatchObject({ reason: 'refusal' })
    const last = agent.session.at(agent.session.length - 1)
    expect(last).toMatchObject({ type: 'turn/end', reason: 'refusal' })
    const answer = agent.session.events().find((event) => event.type === 'assistant/message')
    expect(answer).toMatchObject({ finish: 'content-filter' })
    expect(answer?.type === 'assistant/message' && textOf(answer.message.content)).toBe('I cannot help with')
  })

  it('tool calls of a filtered response are failed, not run', async () => {
    let ran = false
    harness = await createHarness({ script: [{ reply: [{ call: { tool: 'touch' }, finish: 'content-filter' }] }] })
    harness.ctx.tools.register({ name: 'touch', description: 'x', parameters: { type: 'object' }, execute: () => ((ran = true), 'touched') })
    const agent = await harness.agent()
    expect(await agent.followup('go')).toMatchObject({ reason: 'refusal' })
    expect(ran).toBe(false)
    expect(toolResults(harness, agent.id)).toEqual([{ isError: true, text: 'touch was not run: the response ended the turn (refusal)' }])
  })

  it('a length finish ends the turn max-tokens', async () => {
    harness = await createHarness({ script: [{ reply: [{ text: 'cut off mid', finish: 'length' }] }] })
    const agent = await harness.agent()
    expect(await agent.followup('go')).toMatchObject({ reason: 'max-tokens' })
  })
})
