import { afterEach, describe, expect, it } from 'vitest'
import { TaskState } from '@a2a-js/sdk'
import { serveA2a, A2aServerError } from '@dsh/a2a-server'
import { createHarness } from '@dsh/testkit/harness'
import { artifactText, finalState, sdkClient, startWorker, streamAll, until, userMessage, type Worker } from './helpers.js'

const workers: Worker[] = []
afterEach(async () => {
  await Promise.all(workers.splice(0).map((worker) => worker.dispose()))
})

async function worker(...args: Parameters<typeof startWorker>): Promise<Worker> {
  const started = await startWorker(...args)
  workers.push(started)
  return started
}

describe('dsh a2a server driven by the SDK client', () => {
  it('serves an agent card and runs a streamed task as one dsh session that streams and completes', async () => {
    const w = await worker([{ reply: [{ text: 'Paris is the capital.' }] }])
    const client = await sdkClient(w.server.url)
    const card = await client.getAgentCard()
    expect(card.name).toBe('dsh')
    expect(card.capabilities?.streaming).toBe(true)
    const events = await streamAll(client, userMessage('capital of France?'))
    expect(events[0]?.payload?.$case).toBe('task')
    expect(events.some((event) => event.payload?.$case === 'statusUpdate' && event.payload.value.status?.state === TaskState.TASK_STATE_WORKING)).toBe(true)
    expect(artifactText(events, 'stream')).toBe('Paris is the capital.')
    expect(artifactText(events, 'answer')).toBe('Paris is the capital.')
    expect(finalState(events)).toBe(TaskState.TASK_STATE_COMPLETED)
    expect(w.sessions).toHaveLength(1)
    expect(w.sessions[0]!.header.origin).toBe('a2a')
    expect(w.sessions[0]!.events().some((event) => event.type === 'turn/end' && event.reason === 'completed')).toBe(true)
  })

  it('records the lineage the message metadata carries in the session header', async () => {
    const w = await worker([{ reply: [{ text: 'ok' }] }])
    const client = await sdkClient(w.server.url)
    await streamAll(client, userMessage('hi', { dsh: { parentSession: 'parent-1', delegationDepth: 2, provider: 'a2a', label: 'look up' } }))
    expect(w.sessions[0]!.header).toMatchObject({ origin: 'a2a', parentSession: 'parent-1', delegationDepth: 2, provider: 'a2a', label: 'look up' })
  })

  it('a task deeper than maxDepth is rejected and creates no session', async () => {
    const w = await worker([{ reply: [{ text: 'ok' }] }], { maxDepth: 1 })
    const client = await sdkClient(w.server.url)
    const events = await streamAll(client, userMessage('hi', { dsh: { parentSession: 'p', delegationDepth: 2, provider: 'a2a' } }))
    expect(finalState(events)).toBe(TaskState.TASK_STATE_REJECTED)
    expect(w.sessions).toHaveLength(0)
  })

  it('a cancel ends the turn aborted and the task canceled', async () => {
    const w = await worker([{ reply: [{ text: 'slow', delay_ms: 60_000 }] }])
    const client = await sdkClient(w.server.url)
    let taskId: string | undefined
    const streamed = streamAll(client, userMessage('take your time'), (event) => {
      if (event.payload?.$case === 'task') taskId = event.payload.value.id
    })
    await until(() => taskId !== undefined && w.sessions.length === 1)
    const cancelled = await client.cancelTask({ tenant: '', id: taskId!, metadata: undefined })
    expect(cancelled.status?.state).toBe(TaskState.TASK_STATE_CANCELED)
    expect(finalState(await streamed)).toBe(TaskState.TASK_STATE_CANCELED)
    expect(w.sessions[0]!.events().some((event) => event.type === 'turn/end' && event.reason === 'aborted')).toBe(true)
    expect(w.server.taskCount).toBe(0)
  })

  it('tasks beyond maxTasks wait in submitted until a slot frees', async () => {
    const w = await worker([{ reply: [{ text: 'done', delay_ms: 200 }] }], { maxTasks: 1 })
    // When each session is created: had every earlier one ended its turn?
    const earlierEnded: boolean[] = []
    w.harness.ctx.sessions.addObserver({
      created: () => void earlierEnded.push(w.sessions.slice(0, -1).every((session) => session.events().some((event) => event.type === 'turn/end'))),
    })
    const client = await sdkClient(w.server.url)
    const [first, second] = await Promise.all([streamAll(client, userMessage('one')), streamAll(client, userMessage('two'))])
    expect(finalState(first)).toBe(TaskState.TASK_STATE_COMPLETED)
    expect(finalState(second)).toBe(TaskState.TASK_STATE_COMPLETED)
    expect(earlierEnded).toEqual([true, true])
  })

  it('an oversized message is refused with a clear error and the worker keeps serving', async () => {
    const w = await worker([{ reply: [{ text: 'still here' }] }])
    const client = await sdkClient(w.server.url)
    await expect(streamAll(client, userMessage('x'.repeat(300_000)))).rejects.toThrow(/413|too large/i)
    const events = await streamAll(client, userMessage('small'))
    expect(finalState(events)).toBe(TaskState.TASK_STATE_COMPLETED)
    expect(w.sessions).toHaveLength(1)
  })
})

describe('dsh a2a server access', () => {
  it('with a token, a request without it or with a wrong one gets 401 and the right one is served', async () => {
    const w = await worker([{ reply: [{ text: 'authorised' }] }], { token: 's3cret' })
    const card = `${w.server.url}/.well-known/agent-card.json`
    expect((await fetch(card)).status).toBe(401)
    const wrong = await fetch(card, { headers: { Authorization: 'Bearer nope' } })
    expect(wrong.status).toBe(401)
    expect(((await wrong.json()) as { error: string }).error).toMatch(/bearer token is wrong/)
    await expect(sdkClient(w.server.url, 'nope')).rejects.toThrow(/401/)
    const client = await sdkClient(w.server.url, 's3cret')
    expect(artifactText(await streamAll(client, userMessage('hi')), 'answer')).toBe('authorised')
    expect(w.sessions).toHaveLength(1)
  })

  it('refuses to listen on a non-loopback address without a token', async () => {
    const harness = await createHarness({ script: [{ reply: [{ text: 'unused' }] }] })
    try {
      await expect(serveA2a(harness.ctx, { host: '0.0.0.0' })).rejects.toThrow(A2aServerError)
      await expect(serveA2a(harness.ctx, { host: '0.0.0.0' })).rejects.toThrow(/without a token/)
    } finally {
      await harness.dispose()
    }
  })
})

describe('dsh a2a server and the children of a task', () => {
  it('a cancel stops the children the task delegated to: their turns end aborted too', async () => {
    const { SubagentService } = await import('@dsh/subagent')
    const { SpawnPlugin } = await import('@dsh/subagent-spawn')
    const { SubagentToolPlugin } = await import('@dsh/tool-subagent')
    const w = await worker([
      { when: { depth: 0 }, reply: [{ call: { tool: 'subagent', args: { description: 'slow child', prompt: 'work slowly' } } }, { text: 'never' }] },
      { when: { depth: 1 }, reply: [{ text: 'too slow', delay_ms: 60_000 }] },
    ])
    await w.harness.plugin(SubagentService)
    await w.harness.plugin(SpawnPlugin, {})
    await w.harness.plugin(SubagentToolPlugin, { provider: 'spawn', enableRunInBackground: false })
    const client = await sdkClient(w.server.url)
    let taskId: string | undefined
    const streamed = streamAll(client, userMessage('delegate something slow'), (event) => {
      if (event.payload?.$case === 'task') taskId = event.payload.value.id
    })
    await until(() => taskId !== undefined && w.sessions.some((session) => session.header.delegationDepth === 1 && session.events().some((event) => event.type === 'turn/start')))
    await client.cancelTask({ tenant: '', id: taskId!, metadata: undefined })
    expect(finalState(await streamed)).toBe(TaskState.TASK_STATE_CANCELED)
    const [task, child] = w.sessions
    expect(task!.events().some((event) => event.type === 'turn/end' && event.reason === 'aborted')).toBe(true)
    expect(child!.header).toMatchObject({ parentSession: task!.id, delegationDepth: 1, provider: 'spawn' })
    expect(child!.events().some((event) => event.type === 'turn/end' && event.reason === 'aborted')).toBe(true)
  })
})
