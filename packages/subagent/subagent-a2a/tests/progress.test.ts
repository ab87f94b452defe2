/**
 * Live progress from A2A children: a dsh worker (`serveA2a` on a scripted model) that
 * sends structured progress and usage in `metadata.dsh`, and a plain SDK agent whose
 * metadata is wrong in every way a client must survive.
 */
import { afterEach, describe, expect, it } from 'vitest'
import { TaskState } from '@a2a-js/sdk'
import { AgentEvent, type AgentExecutor } from '@a2a-js/sdk/server'
import { text } from '@dsh/llm'
import { SubagentService } from '@dsh/subagent'
import { A2aProvider, resolveA2aSpec, A2aProviderConfig } from '@dsh/subagent-a2a'
import { createHarness, type Harness } from '@dsh/testkit/harness'
import { listenToChildren, updatesOf, type Heard } from '@dsh/testkit/delegation'
import { dshWorker, sdkAgent } from './helpers.js'

const cleanups: Array<() => Promise<void>> = []
afterEach(async () => {
  for (const cleanup of cleanups.splice(0).reverse()) await cleanup()
})

/** A parent with a fast progress interval and an `a2a` provider on `url`, whose dropped updates are collected. */
async function parentOf(url: string): Promise<{ h: Harness; heard: Heard[]; dropped: string[] }> {
  const h = await createHarness()
  cleanups.push(() => h.dispose())
  await h.plugin(SubagentService, { progressIntervalMs: 20 })
  const dropped: string[] = []
  h.ctx.subagents.registerProvider(new A2aProvider('a2a', { ...resolveA2aSpec(A2aProviderConfig({ urls: [url] })), progressDropped: (reason) => dropped.push(reason) }))
  return { h, heard: listenToChildren(h.ctx), dropped }
}

describe('a2a: live progress', () => {
  it('a dsh worker\'s tool call, streamed text and usage arrive in order before subagent/end, and the result carries the usage', async () => {
    const worker = await dshWorker([{ reply: [{ text: 'Looking it up. ', call: { tool: 'lookup', args: { q: 'capital' } } }, { text: 'It is Paris.', delay_ms: 50 }] }])
    cleanups.push(() => worker.dispose())
    worker.harness.ctx.tools.register({ name: 'lookup', description: 'looks things up', parameters: { type: 'object' }, execute: async () => 'Paris' })
    const { h, heard, dropped } = await parentOf(worker.server.url)
    const run = await h.ctx.subagents.start('a2a', { prompt: [text('capital of France?')], parent: await h.agent(), signal: new AbortController().signal })
    const result = await run.result
    expect(result).toMatchObject({ stopReason: 'completed', output: [text('It is Paris.')] })
    // The worker's own count: the scripted model's usage on both of its model calls.
    expect(result.usage).toEqual({ inputTokens: expect.any(Number), outputTokens: expect.any(Number), cachedInputTokens: 0 })
    expect(result.usage!.inputTokens).toBeGreaterThan(0)
    expect(heard.at(-1)).toMatchObject({ kind: 'end', info: { id: run.id, usage: result.usage } })
    const updates = updatesOf(heard)
    const start = updates.findIndex((update) => update.kind === 'tool-start')
    const end = updates.findIndex((update) => update.kind === 'tool-end')
    expect(updates[start]).toMatchObject({ kind: 'tool-start', name: 'lookup', args: '{"q":"capital"}' })
    expect(updates[end]).toEqual({ kind: 'tool-end', callId: (updates[start] as { callId: string }).callId, name: 'lookup', ok: true })
    expect(start).toBeLessThan(end)
    expect(updates.map((update) => (update.kind === 'text' ? update.text : '')).join('')).toBe('Looking it up. It is Paris.')
    expect(updates.filter((update) => update.kind === 'usage').at(-1)).toEqual({ kind: 'usage', usage: result.usage })
    // dsh's structured progress replaces its "calling lookup" status text.
    expect(updates.some((update) => update.kind === 'status')).toBe(false)
    expect(dropped).toEqual([])
    await run.dispose()
  })

  it('a plain agent\'s status text and artifacts are progress; malformed metadata.dsh progress and usage are dropped and logged, and the run completes', async () => {
    const executor: AgentExecutor = {
      execute: async ({ taskId, contextId }, bus) => {
        const status = (state: TaskState, note: string | undefined, metadata: Record<string, unknown> | undefined) =>
          bus.publish(AgentEvent.statusUpdate({ taskId, contextId, status: { state, message: note === undefined ? undefined : { messageId: `m-${note}`, contextId, taskId, role: 2, parts: [{ content: { $case: 'text', value: note }, metadata: undefined, filename: '', mediaType: 'text/plain' }], metadata: undefined, extensions: [], referenceTaskIds: [] }, timestamp: undefined }, metadata }))
        bus.publish(AgentEvent.task({ id: taskId, contextId, status: { state: TaskState.TASK_STATE_WORKING, message: undefined, timestamp: undefined }, artifacts: [], history: [], metadata: undefined }))
        status(TaskState.TASK_STATE_WORKING, 'warming up', undefined)
        status(TaskState.TASK_STATE_WORKING, undefined, { dsh: { progress: 'not a list' } })
        status(TaskState.TASK_STATE_WORKING, undefined, { dsh: { progress: [{ kind: 'teleport' }, { kind: 'tool-start', callId: 'c1', name: 'grep' }] } })
        bus.publish(AgentEvent.artifactUpdate({ taskId, contextId, artifact: { artifactId: 'report', name: 'report', description: '', parts: [{ content: { $case: 'text', value: 'all well' }, metadata: undefined, filename: '', mediaType: 'text/plain' }], metadata: undefined, extensions: [] }, append: false, lastChunk: true, metadata: undefined }))
        status(TaskState.TASK_STATE_COMPLETED, undefined, { dsh: { usage: { inputTokens: -5 } } })
        bus.finished()
      },
      cancelTask: async () => {},
    }
    const agent = await sdkAgent(executor)
    cleanups.push(() => agent.close())
    const { h, heard, dropped } = await parentOf(agent.url)
    const run = await h.ctx.subagents.start('a2a', { prompt: [text('go')], parent: await h.agent(), signal: new AbortController().signal })
    expect(await run.result).toEqual({ output: [text('all well')], stopReason: 'completed' })
    // `teleport` is not a progress kind: the sink drops it (and logs it at debug level).
    expect(updatesOf(heard)).toEqual([
      { kind: 'status', text: 'warming up' },
      { kind: 'tool-start', callId: 'c1', name: 'grep' },
      { kind: 'text', text: 'all well' },
    ])
    expect(dropped).toEqual([
      'a status update whose metadata.dsh.progress is not a list',
      'a status update whose metadata.dsh.usage is not { inputTokens, outputTokens, cachedInputTokens } in whole tokens',
    ])
    await run.dispose()
  })
})
