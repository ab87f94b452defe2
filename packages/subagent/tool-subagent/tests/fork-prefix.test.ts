import { afterEach, describe, expect, it } from 'vitest'
import type { ChatCompletionCreateParamsStreaming } from 'openai/resources/chat/completions'
import { createHarness, type Harness } from '@dsh/testkit/harness'
import { startFakeOpenAIChat, type FakeOpenAIChat } from '@dsh/testkit'
import OpenAIChat from '@dsh/llm-openai'
import { SubagentService } from '@dsh/subagent'
import { SpawnPlugin } from '@dsh/subagent-spawn'
import { ForkPlugin } from '@dsh/subagent-fork'
import { TaskService } from '@dsh/tasks'
import { TaskToolsPlugin } from '@dsh/tool-tasks'
import { SubagentToolPlugin } from '@dsh/tool-subagent'

const KEY_VAR = 'DSH_FORK_PREFIX_TEST_KEY'

let harness: Harness | undefined
let server: FakeOpenAIChat | undefined
afterEach(async () => {
  await harness?.dispose()
  await server?.close()
  harness = server = undefined
  delete process.env[KEY_VAR]
})

/** Real services talking to the fake chat-completions server through the real OpenAI adapter. */
async function setup(childPersona?: string) {
  server = await startFakeOpenAIChat()
  process.env[KEY_VAR] = 'sk-test'
  harness = await createHarness({ persona: 'You are the parent.' })
  await harness.plugin(OpenAIChat, { name: 'fake', baseURL: server.url, model: 'fake-model', apiKeyEnv: KEY_VAR })
  await harness.plugin(SubagentService)
  await harness.plugin(SpawnPlugin, {})
  await harness.plugin(ForkPlugin, {})
  await harness.plugin(TaskService, {})
  await harness.plugin(TaskToolsPlugin)
  await harness.plugin(SubagentToolPlugin, { provider: 'spawn' })
  await harness.plugin(SubagentToolPlugin, { provider: 'fork', toolName: 'fork', ...(childPersona && { persona: childPersona }) })
  // A section added by some other plugin must not break the shared prefix either, even one
  // whose text differs per agent (a stand-in for the environment's date on a fork made
  // after midnight): a fork child is sent its parent's prompt.
  harness.ctx.agents.addPromptSection({ name: 'house-rules', order: 500, render: (agent) => `# House rules\n- Keep answers short.\n- Session ${agent.id}.` })
  return harness.agent({ agentOptions: { model: 'fake:fake-model' } })
}

function bodyOf(index: number): ChatCompletionCreateParamsStreaming {
  return server!.requests[index]!.body as ChatCompletionCreateParamsStreaming
}

/** Parent: one completed turn, then a turn that forks a child and reads its answer. */
async function forkAfterOneTurn(childPersona?: string) {
  const parent = await setup(childPersona)
  server!.enqueue(
    { text: 'Noted: the plan is to migrate the database first.' },
    { toolCalls: [{ name: 'fork', arguments: { prompt: 'List the risks of that plan.', description: 'risks' } }] },
    { text: 'Risk: downtime.' },
    { text: 'The child found one risk.' },
  )
  expect((await parent.followup('The plan: migrate the database first. Remember it.')).reason).toBe('completed')
  expect((await parent.followup('Fork a child to list the risks.')).reason).toBe('completed')
  expect(server!.requests).toHaveLength(4)
  return parent
}

describe('cache-friendly forks', () => {
  it("a fork child's first request repeats the parent's last request prefix byte for byte: system prompt, tools, seeded messages", async () => {
    const parent = await forkAfterOneTurn()
    const parentLast = bodyOf(1)
    const child = bodyOf(2)
    // The seed is the parent's completed turn (its user message and its answer) and the
    // in-flight turn's user message: the parent's last request without the pending call.
    const shared = 1 + 2 + 1
    expect(parentLast.messages).toHaveLength(shared)
    expect(child.model).toBe(parentLast.model)
    expect(JSON.stringify(child.tools)).toBe(JSON.stringify(parentLast.tools))
    expect(JSON.stringify(child.messages.slice(0, shared))).toBe(JSON.stringify(parentLast.messages.slice(0, shared)))
    expect(child.messages[0]).toMatchObject({ role: 'system' })
    expect(String(child.messages[0]!.content)).toContain(`- Session ${parent.id}.`)
    expect(child.messages[shared]).toEqual({ role: 'user', content: 'List the risks of that plan.' })
    // On the wire: the raw bodies agree up to where the conversations part.
    const parentRaw = server!.requests[1]!.rawBody
    const childRaw = server!.requests[2]!.rawBody
    const prefix = JSON.stringify({ model: parentLast.model, messages: parentLast.messages.slice(0, shared) }).slice(0, -2)
    expect(parentRaw.startsWith(prefix)).toBe(true)
    expect(childRaw.startsWith(prefix)).toBe(true)
  })

  it('a fork child with its own persona keeps its own system prompt', async () => {
    await forkAfterOneTurn('You are a risk analyst.')
    const child = bodyOf(2)
    expect(String(child.messages[0]!.content).startsWith('You are a risk analyst.')).toBe(true)
    expect(String(bodyOf(1).messages[0]!.content).startsWith('You are the parent.')).toBe(true)
  })
})
