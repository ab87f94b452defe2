/**
 * End-to-end against the real DeepSeek API: run only when DEEPSEEK_API_KEY is set, and
 * reported as skipped with the reason otherwise. Each test gives the model a random nonce
 * that it cannot guess, so a pass means the delegation really carried it.
 */
import { randomBytes } from 'node:crypto'
import { afterEach, describe, expect, it, type TestContext } from 'vitest'
import { textOf } from '@dsh/llm'
import type { SessionEvent } from '@dsh/session'
import { createHarness, type Harness } from '@dsh/testkit/harness'
import OpenAIChat from '@dsh/llm-openai'
import { SubagentService } from '@dsh/subagent'
import { SpawnPlugin } from '@dsh/subagent-spawn'
import { ForkPlugin } from '@dsh/subagent-fork'
import { TaskService } from '@dsh/tasks'
import { TaskToolsPlugin } from '@dsh/tool-tasks'
import { SubagentToolPlugin } from '@dsh/tool-subagent'

const KEY = process.env.DEEPSEEK_API_KEY
const SKIP_REASON = 'DEEPSEEK_API_KEY is not set: this end-to-end test talks to the real DeepSeek API'
/** A real model takes its time; this bounds a stuck request, it is not a speed check. */
const LIVE_TIMEOUT_MS = 240_000

let harness: Harness | undefined
afterEach(async () => {
  await harness?.dispose()
  harness = undefined
})

function requireKey(context: TestContext): void {
  if (!KEY) context.skip(SKIP_REASON)
}

async function liveParent() {
  harness = await createHarness()
  await harness.plugin(OpenAIChat, {})
  await harness.plugin(SubagentService)
  await harness.plugin(SpawnPlugin, {})
  await harness.plugin(ForkPlugin, {})
  await harness.plugin(TaskService, {})
  await harness.plugin(TaskToolsPlugin)
  await harness.plugin(SubagentToolPlugin, { provider: 'spawn' })
  await harness.plugin(SubagentToolPlugin, { provider: 'fork', toolName: 'fork' })
  return harness.agent({ agentOptions: { model: 'deepseek:deepseek-chat' } })
}

const nonce = () => `N${randomBytes(6).toString('hex').toUpperCase()}`

function calls(events: readonly SessionEvent[], name: string) {
  return events.flatMap((event) => (event.type === 'tool/call' && event.call.name === name ? [event.call] : []))
}

function resultsText(events: readonly SessionEvent[], name: string): string {
  return events.flatMap((event) => (event.type === 'tool/result' && event.result.name === name ? [textOf(event.result.content)] : [])).join('\n')
}

describe('live DeepSeek delegation', () => {
  it('a spawn child repeats a random nonce back to its parent', { timeout: LIVE_TIMEOUT_MS }, async (context) => {
    requireKey(context)
    const code = nonce()
    const parent = await liveParent()
    const result = await parent.followup(`Use the subagent tool once: ask a subagent to reply with exactly this code and nothing else: ${code}. Then tell me what it replied.`)
    expect(result.reason).toBe('completed')
    const events = parent.session.events()
    expect(calls(events, 'subagent').length).toBeGreaterThan(0)
    expect(resultsText(events, 'subagent')).toContain(code)
  })

  it("a fork child recalls a nonce from the parent's earlier turn", { timeout: LIVE_TIMEOUT_MS }, async (context) => {
    requireKey(context)
    const code = nonce()
    const parent = await liveParent()
    expect((await parent.followup(`Remember this code: ${code}. Reply only with "ok".`)).reason).toBe('completed')
    const result = await parent.followup('Use the fork tool once: ask the forked subagent which code I gave you earlier. Do not write the code in your prompt to it; it can see our earlier conversation. Then tell me its answer.')
    expect(result.reason).toBe('completed')
    const events = parent.session.events()
    const forks = calls(events, 'fork')
    expect(forks.length).toBeGreaterThan(0)
    // The code must come from the fork's seeded history, not from the delegated prompt.
    expect(forks.map((call) => JSON.stringify(call.args)).join('\n')).not.toContain(code)
    expect(resultsText(events, 'fork')).toContain(code)
  })

  it('a background child is collected with task_output', { timeout: LIVE_TIMEOUT_MS }, async (context) => {
    requireKey(context)
    const code = nonce()
    const parent = await liveParent()
    const result = await parent.followup(
      `Start a subagent in the background (subagent tool with run_in_background: true) that must reply with exactly this code and nothing else: ${code}. Then collect its answer with task_output (wait: true) and tell me the code it returned.`,
    )
    expect(result.reason).toBe('completed')
    await parent.whenIdle()
    const events = parent.session.events()
    expect(calls(events, 'subagent').some((call) => (call.args as { run_in_background?: boolean } | undefined)?.run_in_background === true)).toBe(true)
    expect(calls(events, 'task_output').length).toBeGreaterThan(0)
    expect(resultsText(events, 'task_output')).toContain(code)
  })
})
