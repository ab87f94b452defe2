/**
 * A worker whose card says protocol 0.3: the provider speaks 0.3 to it (the SDK's
 * compatibility layer), and the run is like any other.
 */
import { afterEach, describe, expect, it } from 'vitest'
import { TaskState } from '@a2a-js/sdk'
import { AgentEvent, type AgentExecutor } from '@a2a-js/sdk/server'
import { outputText } from '@dsh/subagent'
import { legacyAgent, parentWith, type Parent } from './helpers.js'

const cleanups: Array<() => Promise<void>> = []
afterEach(async () => {
  for (const cleanup of cleanups.splice(0).reverse()) await cleanup()
})

async function parent(urls: string[]): Promise<Parent> {
  const started = await parentWith({ urls })
  cleanups.push(() => started.harness.dispose())
  return started
}

describe('a2a provider against a 0.3 agent', () => {
  it('a run on a worker whose card offers only 0.3 is a 0.3 message/stream, and ends with its answer', async () => {
    const executor: AgentExecutor = {
      execute: async (request, bus) => {
        const { taskId, contextId } = request
        bus.publish(AgentEvent.task({ id: taskId, contextId, status: { state: TaskState.TASK_STATE_WORKING, message: undefined, timestamp: new Date().toISOString() }, artifacts: [], history: [request.userMessage], metadata: undefined }))
        bus.publish(AgentEvent.artifactUpdate({ taskId, contextId, artifact: { artifactId: 'a1', name: 'result', description: '', parts: [{ content: { $case: 'text', value: 'answered in 0.3' }, metadata: undefined, filename: '', mediaType: 'text/plain' }], metadata: undefined, extensions: [] }, append: false, lastChunk: true, metadata: undefined }))
        bus.publish(AgentEvent.statusUpdate({ taskId, contextId, status: { state: TaskState.TASK_STATE_COMPLETED, message: undefined, timestamp: new Date().toISOString() }, metadata: undefined }))
        bus.finished()
      },
      cancelTask: async () => {},
    }
    const agent = await legacyAgent(executor)
    cleanups.push(() => agent.close())
    const p = await parent([agent.url])
    const run = await p.harness.ctx.subagents.start('a2a', p.request('hello from 1.0'))
    cleanups.push(() => run.dispose())
    const result = await run.result
    expect(result, result.diagnostic).toMatchObject({ stopReason: 'completed' })
    expect(outputText(result.output)).toBe('answered in 0.3')
    expect(agent.methods).toEqual(['message/stream'])
  })
})
