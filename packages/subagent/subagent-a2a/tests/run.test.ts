import { afterEach, describe, expect, it } from 'vitest'
import express from 'express'
import { TaskState } from '@a2a-js/sdk'
import { AgentEvent, type AgentExecutor } from '@a2a-js/sdk/server'
import { outputText, setTraceContextSource } from '@dsh/subagent'
import { A2aProvider } from '@dsh/subagent-a2a'
import { dshWorker, listenOnLoopback, parentWith, sdkAgent, until, type DshWorker, type Parent, type PlainServer } from './helpers.js'

const cleanups: Array<() => Promise<void>> = []
afterEach(async () => {
  for (const cleanup of cleanups.splice(0).reverse()) await cleanup()
})

async function worker(...args: Parameters<typeof dshWorker>): Promise<DshWorker> {
  const started = await dshWorker(...args)
  cleanups.push(() => started.dispose())
  return started
}

async function parent(...args: Parameters<typeof parentWith>): Promise<Parent> {
  const started = await parentWith(...args)
  cleanups.push(() => started.harness.dispose())
  return started
}

function track<T extends PlainServer>(server: T): T {
  cleanups.push(() => server.close())
  return server
}

function providerOf(p: Parent): A2aProvider {
  return p.harness.ctx.subagents.getProvider('a2a') as A2aProvider
}

describe('a2a provider against dsh workers', () => {
  it('a run is a streamed task that completes with the answer; the worker session records the lineage', async () => {
    const w = await worker([{ reply: [{ text: 'Paris.' }] }])
    const p = await parent({ urls: [w.server.url] })
    const run = await p.harness.ctx.subagents.start('a2a', p.request('capital of France?', { label: 'geo' }))
    expect(run.local).toBe(false)
    expect(run.id).toMatch(/^a2a:/)
    const result = await run.result
    expect(result).toMatchObject({ stopReason: 'completed' })
    expect(outputText(result.output)).toBe('Paris.')
    expect(w.sessions[0]!.header).toMatchObject({ origin: 'a2a', parentSession: p.parent.id, delegationDepth: 1, provider: 'a2a', label: 'geo' })
    await run.dispose()
  })

  it('cancel sends the task cancel: the run ends aborted and the worker turn ends aborted', async () => {
    const w = await worker([{ reply: [{ text: 'never', delay_ms: 60_000 }] }])
    const p = await parent({ urls: [w.server.url] })
    const run = await p.harness.ctx.subagents.start('a2a', p.request('slow'))
    await until(() => w.sessions.length === 1)
    run.cancel()
    const result = await run.result
    expect(result.stopReason).toBe('aborted')
    await until(() => w.server.taskCount === 0)
    expect(w.sessions[0]!.events().some((event) => event.type === 'turn/end' && event.reason === 'aborted')).toBe(true)
    await run.dispose()
  })

  it('runs spread over the workers least busy first', async () => {
    const script = [{ reply: [{ text: 'done', delay_ms: 300 }] }]
    const [a, b] = [await worker(script), await worker(script)]
    const p = await parent({ urls: [a.server.url, b.server.url] })
    const runs = await Promise.all([1, 2, 3, 4].map((n) => p.harness.ctx.subagents.start('a2a', p.request(`task ${n}`))))
    const results = await Promise.all(runs.map((run) => run.result))
    expect(results.map((result) => result.stopReason)).toEqual(['completed', 'completed', 'completed', 'completed'])
    expect([a.sessions.length, b.sessions.length]).toEqual([2, 2])
    await Promise.all(runs.map((run) => run.dispose()))
  })

  it('the next run goes to the least busy worker, not the next in turn', async () => {
    const quick = await worker([{ reply: [{ text: 'quick' }] }])
    const busy = await worker([{ reply: [{ text: 'slow', delay_ms: 60_000 }] }])
    const p = await parent({ urls: [quick.server.url, busy.server.url] })
    const start = () => p.harness.ctx.subagents.start('a2a', p.request('work'))
    // 1 → quick (first in turn), 2 → busy (stays busy), 3 → quick (in turn, and least busy).
    const first = await start()
    expect((await first.result).stopReason).toBe('completed')
    const held = await start()
    cleanups.push(() => held.dispose())
    await until(() => busy.sessions.length === 1)
    const third = await start()
    expect((await third.result).stopReason).toBe('completed')
    // In turn it would be the busy worker's; it has one run, the quick one none.
    const fourth = await start()
    cleanups.push(() => fourth.dispose())
    await until(() => quick.sessions.length + busy.sessions.length === 4)
    expect([quick.sessions.length, busy.sessions.length]).toEqual([3, 1])
    expect((await fourth.result).stopReason).toBe('completed')
    await Promise.all([first, third].map((run) => run.dispose()))
  })

  it('an unreachable worker ends its run error with a diagnostic and is skipped for the next runs', async () => {
    const gone = track(await listenOnLoopback(express()))
    await gone.close()
    const w = await worker([{ reply: [{ text: 'here' }] }])
    const p = await parent({ urls: [gone.url, w.server.url] })
    const results = []
    for (let n = 0; n < 4; n++) {
      const run = await p.harness.ctx.subagents.start('a2a', p.request(`task ${n}`))
      results.push(await run.result)
      await run.dispose()
    }
    const failed = results.filter((result) => result.stopReason === 'error')
    expect(failed).toHaveLength(1)
    expect(failed[0]!.diagnostic).toContain(gone.url)
    expect(failed[0]!.diagnostic).toMatch(/did not answer.*skipped for the next runs/)
    expect(w.sessions).toHaveLength(3)
    expect(providerOf(p).pool.workers[0]!.unreachableSince).toBeDefined()
  })

  it('timeoutMs ends a run that takes too long with error, and the worker cancels its task', async () => {
    const w = await worker([{ reply: [{ text: 'late', delay_ms: 60_000 }] }])
    const p = await parent({ urls: [w.server.url], timeoutMs: 500 })
    const run = await p.harness.ctx.subagents.start('a2a', p.request('slow'))
    const result = await run.result
    expect(result.stopReason).toBe('error')
    expect(result.diagnostic).toMatch(/timeoutMs \(500 ms\)/)
    await run.dispose()
    await until(() => w.server.taskCount === 0)
    expect(w.sessions[0]!.events().some((event) => event.type === 'turn/end' && event.reason === 'aborted')).toBe(true)
  })

  it('the bearer token comes from tokenEnv; a wrong one ends the run error naming 401 at the message (the card is public) and the worker keeps serving', async () => {
    const w = await worker([{ reply: [{ text: 'served' }] }], { token: 'right-token' })
    process.env.DSH_TEST_A2A_RIGHT = 'right-token'
    process.env.DSH_TEST_A2A_WRONG = 'wrong-token'
    const wrong = await parent({ urls: [w.server.url], tokenEnv: 'DSH_TEST_A2A_WRONG' })
    const refused = await (await wrong.harness.ctx.subagents.start('a2a', wrong.request('hi'))).result
    expect(refused.stopReason).toBe('error')
    expect(refused.diagnostic).toMatch(/refused the token \(401 Unauthorized\) at stage message\/stream; check that DSH_TEST_A2A_WRONG \(tokenEnv\) holds the token .*\(401 Unauthorized from http:\/\/127\.0\.0\.1:\d+\/a2a\/jsonrpc: 401 Unauthorized: the bearer token is wrong/)
    const right = await parent({ urls: [w.server.url], tokenEnv: 'DSH_TEST_A2A_RIGHT' })
    const served = await (await right.harness.ctx.subagents.start('a2a', right.request('hi'))).result
    expect(served.stopReason).toBe('completed')
    expect(outputText(served.output)).toBe('served')
    expect(w.sessions).toHaveLength(1)
  })

  it('the token goes only to the configured worker\'s origin: a card naming an endpoint on another host does not get it sent there', async () => {
    const seenElsewhere: Array<string | undefined> = []
    const elsewhere = express()
    elsewhere.use((request, response) => {
      seenElsewhere.push(request.headers.authorization)
      response.status(401).json({ error: 'no' })
    })
    const other = track(await listenOnLoopback(elsewhere))
    const seenAtWorker: Array<string | undefined> = []
    const cardOnly = express()
    cardOnly.get('/.well-known/agent-card.json', (request, response) => {
      seenAtWorker.push(request.headers.authorization)
      response.json({
        name: 'redirecting', description: 'names another host', version: '1.0.0',
        supportedInterfaces: [{ url: `${other.url}/rpc`, protocolBinding: 'JSONRPC', tenant: '', protocolVersion: '1.0' }],
        capabilities: { streaming: true, pushNotifications: false, extensions: [] },
        securitySchemes: {}, securityRequirements: [], defaultInputModes: ['text/plain'], defaultOutputModes: ['text/plain'], skills: [], signatures: [],
      })
    })
    const configured = track(await listenOnLoopback(cardOnly))
    process.env.DSH_TEST_A2A_ORIGIN = 'origin-bound-token'
    const p = await parent({ urls: [configured.url], tokenEnv: 'DSH_TEST_A2A_ORIGIN' })
    const result = await (await p.harness.ctx.subagents.start('a2a', p.request('hi'))).result
    expect(result.stopReason).toBe('error')
    expect(seenAtWorker).toEqual(['Bearer origin-bound-token'])
    expect(seenElsewhere.length).toBeGreaterThan(0)
    expect(seenElsewhere.every((header) => header === undefined)).toBe(true)
  })

  it('a worker whose card is public and whose message endpoint answers 401 in a body the SDK cannot read (not a JSON-RPC error) still ends the run saying the token was refused, at the stage it was, with its reason', async () => {
    const app = express()
    app.get('/.well-known/agent-card.json', (_request, response) => {
      response.json({
        name: 'guarded', description: 'a public card, tasks behind a token', version: '1.0.0',
        supportedInterfaces: [{ url: `${guarded.url}/rpc`, protocolBinding: 'JSONRPC', tenant: '', protocolVersion: '1.0' }],
        capabilities: { streaming: true, pushNotifications: false, extensions: [] },
        securitySchemes: {}, securityRequirements: [], defaultInputModes: ['text/plain'], defaultOutputModes: ['text/plain'], skills: [], signatures: [],
      })
    })
    app.post('/rpc', (_request, response) => void response.status(401).json({ error: 'that token is not one of ours \u001b[31m' }))
    const guarded = track(await listenOnLoopback(app))
    process.env.DSH_TEST_A2A_GUARDED = 'not-ours'
    const p = await parent({ urls: [guarded.url], tokenEnv: 'DSH_TEST_A2A_GUARDED' })
    const refused = await (await p.harness.ctx.subagents.start('a2a', p.request('hi'))).result
    expect(refused.stopReason).toBe('error')
    expect(refused.diagnostic).toBe(
      `the A2A worker ${guarded.url} refused the token (401 Unauthorized) at stage message/stream; check that DSH_TEST_A2A_GUARDED (tokenEnv) holds the token the worker was started with (dsh a2a serve --token-env NAME) (401 Unauthorized from ${guarded.url}/rpc: that token is not one of ours [31m)`,
    )
    // A card that itself needs the token is refused at that stage, and says so the same way.
    const closed = express()
    closed.use((_request, response) => void response.status(401).send(''))
    const cardBehindToken = track(await listenOnLoopback(closed))
    const q = await parent({ urls: [cardBehindToken.url], tokenEnv: 'DSH_TEST_A2A_GUARDED' })
    const atCard = await (await q.harness.ctx.subagents.start('a2a', q.request('hi'))).result
    expect(atCard.diagnostic).toMatch(/refused the token \(401 Unauthorized\) at stage agent card; check that DSH_TEST_A2A_GUARDED \(tokenEnv\)/)
  })

  it('a traced delegation sends the trace context as W3C headers and as root keys of the message metadata', async () => {
    const traceparent = '00-4bf92f3577b34da6a3ce929d0e0e4736-00f067aa0ba902b7-01'
    const seen: { header?: string | string[]; metadata?: unknown }[] = []
    const app = express()
    app.use(express.json())
    app.get('/.well-known/agent-card.json', (_request, response) => {
      response.json({
        name: 'recorder', description: 'records what it is sent', version: '1.0.0',
        supportedInterfaces: [{ url: `${recorder.url}/rpc`, protocolBinding: 'JSONRPC', tenant: '', protocolVersion: '1.0' }],
        capabilities: { streaming: true, pushNotifications: false, extensions: [] },
        securitySchemes: {}, securityRequirements: [], defaultInputModes: ['text/plain'], defaultOutputModes: ['text/plain'], skills: [], signatures: [],
      })
    })
    app.post('/rpc', (request, response) => {
      seen.push({ header: request.headers.traceparent, metadata: (request.body as { params?: { message?: { metadata?: unknown } } }).params?.message?.metadata })
      response.status(503).json({ error: 'recorded' })
    })
    const recorder = track(await listenOnLoopback(app))
    const remove = setTraceContextSource(() => ({ traceparent, tracestate: 'k=v' }))
    try {
      const p = await parent({ urls: [recorder.url] })
      const result = await (await p.harness.ctx.subagents.start('a2a', p.request('hi'))).result
      expect(result.stopReason).toBe('error')
    } finally {
      remove()
    }
    expect(seen.length).toBeGreaterThan(0)
    expect(seen[0]!.header).toBe(traceparent)
    expect(seen[0]!.metadata).toMatchObject({ traceparent, tracestate: 'k=v', dsh: { delegationDepth: 1, provider: 'a2a' } })
  })

  it('an oversized prompt ends the run error naming the refusal, and the worker serves the next run', async () => {
    const w = await worker([{ reply: [{ text: 'fine' }] }])
    const p = await parent({ urls: [w.server.url] })
    const refused = await (await p.harness.ctx.subagents.start('a2a', p.request('x'.repeat(300_000)))).result
    expect(refused.stopReason).toBe('error')
    expect(refused.diagnostic).toMatch(/refused the run at stage message\/stream: .*413/)
    const next = await (await p.harness.ctx.subagents.start('a2a', p.request('small'))).result
    expect(next.stopReason).toBe('completed')
    expect(w.sessions).toHaveLength(1)
  })

  it('a malformed agent card ends the run error with a diagnostic', async () => {
    const app = express()
    app.get('/.well-known/agent-card.json', (_request, response) => void response.type('application/json').send('{"name": 42, "supportedInterfaces": "nope"'))
    const bad = track(await listenOnLoopback(app))
    const p = await parent({ urls: [bad.url] })
    const result = await (await p.harness.ctx.subagents.start('a2a', p.request('hi'))).result
    expect(result.stopReason).toBe('error')
    expect(result.diagnostic).toContain(bad.url)
    expect(result.diagnostic).toMatch(/agent card/)
  })
})

describe('a2a provider against an agent on the SDK server classes', () => {
  it('drives it to completion and reads its artifact', async () => {
    const executor: AgentExecutor = {
      execute: async (context, bus) => {
        const { taskId, contextId } = context
        bus.publish(AgentEvent.task({ id: taskId, contextId, status: { state: TaskState.TASK_STATE_WORKING, message: undefined, timestamp: undefined }, artifacts: [], history: [], metadata: undefined }))
        const asked = context.userMessage.parts.map((part) => (part.content?.$case === 'text' ? part.content.value : '')).join('')
        const lineage = (context.userMessage.metadata as { dsh?: { delegationDepth?: number } } | undefined)?.dsh
        bus.publish(AgentEvent.artifactUpdate({ taskId, contextId, artifact: { artifactId: 'reply', name: 'reply', description: '', parts: [{ content: { $case: 'text', value: `echo ${asked} at depth ${lineage?.delegationDepth}` }, metadata: undefined, filename: '', mediaType: 'text/plain' }], metadata: undefined, extensions: [] }, append: false, lastChunk: true, metadata: undefined }))
        bus.publish(AgentEvent.statusUpdate({ taskId, contextId, status: { state: TaskState.TASK_STATE_COMPLETED, message: undefined, timestamp: undefined }, metadata: undefined }))
        bus.finished()
      },
      cancelTask: async () => {},
    }
    const agent = track(await sdkAgent(executor))
    const p = await parent({ urls: [agent.url] })
    const result = await (await p.harness.ctx.subagents.start('a2a', p.request('ping'))).result
    expect(result).toMatchObject({ stopReason: 'completed' })
    expect(outputText(result.output)).toBe('echo ping at depth 1')
  })

  it('a worker that closes the stream mid-answer ends the run error, and its next task is served', async () => {
    let tasks = 0
    let entered = false
    const executor: AgentExecutor = {
      execute: async (context, bus) => {
        const { taskId, contextId } = context
        bus.publish(AgentEvent.task({ id: taskId, contextId, status: { state: TaskState.TASK_STATE_WORKING, message: undefined, timestamp: undefined }, artifacts: [], history: [], metadata: undefined }))
        if (++tasks === 1) {
          // The first task never finishes: its stream is cut under it.
          entered = true
          return new Promise<void>(() => {})
        }
        bus.publish(AgentEvent.statusUpdate({ taskId, contextId, status: { state: TaskState.TASK_STATE_COMPLETED, message: undefined, timestamp: undefined }, metadata: undefined }))
        bus.finished()
      },
      cancelTask: async () => {},
    }
    const agent = track(await sdkAgent(executor))
    const p = await parent({ urls: [agent.url] })
    const run = await p.harness.ctx.subagents.start('a2a', p.request('first'))
    await until(() => entered)
    agent.http.closeAllConnections()
    const result = await run.result
    expect(result.stopReason).toBe('error')
    expect(result.diagnostic).toMatch(/stopped answering during task/)
    await run.dispose()
    // The worker still serves (it was marked unreachable by the cut: try it again at once).
    providerOf(p).pool.workers[0]!.markAnswering()
    const next = await (await p.harness.ctx.subagents.start('a2a', p.request('second'))).result
    expect(next.diagnostic).toBeUndefined()
    expect(next.stopReason).toBe('completed')
  })

  it('a delegation cancelled while its worker is starting it does not mark that worker unreachable', async () => {
    let entered = false
    let open = () => {}
    const gate = new Promise<void>((resolve) => (open = resolve))
    const executor: AgentExecutor = {
      execute: async (context, bus) => {
        entered = true
        // A healthy worker that takes its time before naming the task.
        await gate
        bus.publish(AgentEvent.task({ id: context.taskId, contextId: context.contextId, status: { state: TaskState.TASK_STATE_COMPLETED, message: undefined, timestamp: undefined }, artifacts: [], history: [], metadata: undefined }))
        bus.finished()
      },
      cancelTask: async () => {},
    }
    const agent = track(await sdkAgent(executor))
    let requestClosed = false
    agent.http.on('request', (request) => request.on('close', () => (requestClosed = true)))
    cleanups.push(async () => open())
    const p = await parent({ urls: [agent.url] })
    const cancel = new AbortController()
    const starting = p.harness.ctx.subagents.start('a2a', p.request('take a moment', { signal: cancel.signal }))
    await until(() => entered)
    cancel.abort(new Error('the parent changed its mind'))
    await expect(starting).rejects.toMatchObject({ code: 'ABORTED' })
    await until(() => requestClosed)
    expect(providerOf(p).pool.workers[0]!.unreachableSince).toBeUndefined()
    expect(providerOf(p).pool.workers[0]!.active).toBe(0)
  })

  it('cancel reaches an SDK agent through the task cancel and the run ends aborted', async () => {
    let cancelled = false
    let stop = () => {}
    const executor: AgentExecutor = {
      execute: async (context, bus) => {
        bus.publish(AgentEvent.task({ id: context.taskId, contextId: context.contextId, status: { state: TaskState.TASK_STATE_WORKING, message: undefined, timestamp: undefined }, artifacts: [], history: [], metadata: undefined }))
        // Works until cancelled.
        await new Promise<void>((resolve) => (stop = resolve))
      },
      cancelTask: async (taskId, bus) => {
        cancelled = true
        stop()
        bus.publish(AgentEvent.statusUpdate({ taskId, contextId: '', status: { state: TaskState.TASK_STATE_CANCELED, message: undefined, timestamp: undefined }, metadata: undefined }))
        bus.finished()
      },
    }
    const agent = track(await sdkAgent(executor))
    const p = await parent({ urls: [agent.url] })
    const run = await p.harness.ctx.subagents.start('a2a', p.request('wait'))
    run.cancel()
    const result = await run.result
    expect(result.stopReason).toBe('aborted')
    expect(cancelled).toBe(true)
    await run.dispose()
  })
})
