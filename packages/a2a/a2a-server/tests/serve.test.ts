import { request as httpRequest } from 'node:http'
import { afterEach, describe, expect, it } from 'vitest'
import { TaskState } from '@a2a-js/sdk'
import { ServerCallContext } from '@a2a-js/sdk/server'
import { KEEPALIVE_INTERVAL_MS, serveA2a, A2aServerError } from '@dsh/a2a-server'
import { JSON_RPC_PATH, KEEPALIVE_EXTENSION } from '../src/card.js'
import { BoundedTaskStore } from '../src/task-store.js'
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
    const cardUrl = `${w.server.url}/.well-known/agent-card.json`
    const fetched = await fetch(cardUrl)
    const lastModified = fetched.headers.get('last-modified')
    expect(lastModified).toMatch(/GMT$/)
    expect(fetched.headers.get('etag')).toBeTruthy()
    // (fetch adds Cache-Control: no-cache to a conditional request unless one is given, which would forbid a 304.)
    expect((await fetch(cardUrl, { headers: { 'if-modified-since': lastModified!, 'cache-control': 'max-age=0' } })).status).toBe(304)
    const events = await streamAll(client, userMessage('capital of France?'))
    expect(events[0]?.payload?.$case).toBe('task')
    expect(events.some((event) => event.payload?.$case === 'statusUpdate' && event.payload.value.status?.state === TaskState.TASK_STATE_WORKING)).toBe(true)
    // One artifact: the text streams into it and its last chunk leaves the whole answer.
    const artifactIds = new Set(events.flatMap(({ payload }) => (payload?.$case === 'artifactUpdate' ? [payload.value.artifact?.artifactId] : [])))
    expect([...artifactIds]).toEqual(['answer'])
    expect(artifactText(events, 'answer')).toBe('Paris is the capital.')
    const updates = events.flatMap(({ payload }) => (payload?.$case === 'artifactUpdate' ? [payload.value] : []))
    expect(updates.at(-1)?.lastChunk).toBe(true)
    expect(finalState(events)).toBe(TaskState.TASK_STATE_COMPLETED)
    expect(w.sessions).toHaveLength(1)
    expect(w.sessions[0]!.header.origin).toBe('a2a')
    expect(w.sessions[0]!.events().some((event) => event.type === 'turn/end' && event.reason === 'completed')).toBe(true)
  })

  it('serves the same tasks over the HTTP+JSON binding, declared in the card beside JSON-RPC', async () => {
    const w = await worker([{ reply: [{ text: 'Paris is the capital.' }] }])
    const client = await sdkClient(w.server.url, undefined, 'rest')
    const card = await client.getAgentCard()
    expect(card.supportedInterfaces.map((entry) => `${entry.protocolBinding} ${entry.protocolVersion}`)).toEqual(['JSONRPC 1.0', 'HTTP+JSON 1.0', 'JSONRPC 0.3', 'HTTP+JSON 0.3'])
    const events = await streamAll(client, userMessage('capital of France?'))
    expect(artifactText(events, 'answer')).toBe('Paris is the capital.')
    expect(finalState(events)).toBe(TaskState.TASK_STATE_COMPLETED)
    const taskId = events[0]?.payload?.$case === 'task' ? events[0].payload.value.id : ''
    const fetched = await client.getTask({ tenant: '', id: taskId, historyLength: undefined })
    expect(fetched.status?.state).toBe(TaskState.TASK_STATE_COMPLETED)
    // The binding's conventions: JSON responses, and a body that is not JSON refused with 415 in its error format.
    const rest = `${w.server.url}/a2a/rest`
    const task = await fetch(`${rest}/tasks/${taskId}`)
    expect(task.headers.get('content-type')).toMatch(/^application\/json/)
    const refused = await fetch(`${rest}/message:send`, { method: 'POST', headers: { 'content-type': 'text/plain' }, body: 'hello' })
    expect(refused.status).toBe(415)
    expect(refused.headers.get('content-type')).toMatch(/^application\/json/)
    const body = (await refused.json()) as { error: { code: number; details: Array<{ reason?: string }> } }
    expect(body.error.code).toBe(415)
    expect(body.error.details[0]?.reason).toBe('CONTENT_TYPE_NOT_SUPPORTED')
  })

  it('sends each tool call as structured progress in metadata.dsh.progress, and the task\'s usage on its final status', async () => {
    const w = await worker([{ reply: [{ text: 'Checking.', call: { tool: 'lookup', args: { q: 'France' } } }, { text: 'Paris.' }] }])
    w.harness.ctx.tools.register({ name: 'lookup', description: 'looks things up', parameters: { type: 'object' }, execute: async () => 'Paris' })
    const events = await streamAll(await sdkClient(w.server.url), userMessage('capital?'))
    // "Checking." streamed too, but the artifact's last chunk leaves the answer alone.
    expect(artifactText(events, 'answer')).toBe('Paris.')
    const progress = events.flatMap((event) => {
      if (event.payload?.$case !== 'statusUpdate') return []
      const dsh = (event.payload.value.metadata as { dsh?: { progress?: unknown[] } } | undefined)?.dsh
      return dsh?.progress ?? []
    })
    expect(progress.filter((update) => (update as { kind: string }).kind !== 'usage')).toEqual([
      { kind: 'tool-start', callId: expect.any(String), name: 'lookup', args: '{"q":"France"}' },
      { kind: 'tool-end', callId: expect.any(String), name: 'lookup', ok: true },
    ])
    const final = events.at(-1)!
    expect(final.payload?.$case).toBe('statusUpdate')
    const usage = (final.payload!.value as { metadata?: { dsh?: { usage?: unknown } } }).metadata?.dsh?.usage
    // The sum of both model calls' usage, as the session recorded it.
    const recorded = w.sessions[0]!.events().flatMap((event) => (event.type === 'assistant/message' && event.usage ? [event.usage] : []))
    expect(recorded).toHaveLength(2)
    expect(usage).toEqual({ inputTokens: recorded[0]!.inputTokens + recorded[1]!.inputTokens, outputTokens: recorded[0]!.outputTokens + recorded[1]!.outputTokens, cachedInputTokens: 0 })
    // Usage so far went out as progress too, the last equal to the total.
    expect(progress.filter((update) => (update as { kind: string }).kind === 'usage').at(-1)).toEqual({ kind: 'usage', usage })
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

  it('the delegating parent\'s inherited bound holds on the worker: deeper tasks are refused, and the session records the bound', async () => {
    const w = await worker([{ reply: [{ text: 'ok' }] }], { maxDepth: 3 })
    const client = await sdkClient(w.server.url)
    const refused = await streamAll(client, userMessage('hi', { dsh: { parentSession: 'p', delegationDepth: 2, provider: 'a2a', maxDepth: 1 } }))
    expect(finalState(refused)).toBe(TaskState.TASK_STATE_REJECTED)
    expect(w.sessions).toHaveLength(0)
    await streamAll(client, userMessage('hi', { dsh: { parentSession: 'p', delegationDepth: 1, provider: 'a2a', maxDepth: 1 } }))
    expect(w.sessions[0]!.header).toMatchObject({ delegationDepth: 1, maxDepth: 1 })
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

  it('a message naming a task still working (not waiting for an answer) is refused with an A2A error; the running task goes on and is cancelled cleanly', async () => {
    const w = await worker([{ reply: [{ text: 'slow', delay_ms: 60_000 }] }])
    const client = await sdkClient(w.server.url)
    let taskId: string | undefined
    let contextId = ''
    const first = streamAll(client, userMessage('take your time'), (event) => {
      if (event.payload?.$case === 'task') ({ id: taskId, contextId } = event.payload.value)
    })
    await until(() => taskId !== undefined && w.sessions.length === 1)
    const again = { ...userMessage('and this too'), taskId: taskId!, contextId }
    await expect(streamAll(client, again)).rejects.toThrow(/task \S+ is working and is not waiting for an answer/)
    await expect(client.sendMessage({ tenant: '', message: { ...again, messageId: 'second-try' }, configuration: undefined, metadata: undefined })).rejects.toThrow(/not waiting for an answer/)
    expect(w.sessions).toHaveLength(1)
    await client.cancelTask({ tenant: '', id: taskId!, metadata: undefined })
    // The first stream is whole: it ends canceled, not with an ordering violation.
    expect(finalState(await first)).toBe(TaskState.TASK_STATE_CANCELED)
    expect(w.sessions[0]!.events().some((event) => event.type === 'turn/end' && event.reason === 'aborted')).toBe(true)
    expect(w.server.taskCount).toBe(0)
  })

  it('a working task sends keep-alive status updates at the interval its card advertises', async () => {
    const w = await worker([{ reply: [{ text: 'slow', delay_ms: 60_000 }] }])
    const client = await sdkClient(w.server.url)
    const card = await client.getAgentCard()
    expect(card.capabilities?.extensions.find((extension) => extension.uri === KEEPALIVE_EXTENSION)?.params).toEqual({ intervalMs: KEEPALIVE_INTERVAL_MS })
    let taskId: string | undefined
    const keepAlives: number[] = []
    const streamed = streamAll(client, userMessage('take your time'), (event) => {
      if (event.payload?.$case === 'task') taskId = event.payload.value.id
      if (event.payload?.$case === 'statusUpdate' && (event.payload.value.metadata as { dsh?: { keepAlive?: boolean } } | undefined)?.dsh?.keepAlive) keepAlives.push(event.payload.value.status!.state)
    })
    await until(() => keepAlives.length >= 2)
    expect(keepAlives.slice(0, 2)).toEqual([TaskState.TASK_STATE_WORKING, TaskState.TASK_STATE_WORKING])
    await client.cancelTask({ tenant: '', id: taskId!, metadata: undefined })
    const events = await streamed
    expect(finalState(events)).toBe(TaskState.TASK_STATE_CANCELED)
    // Nothing follows the final status.
    expect(events.at(-1)?.payload?.$case === 'statusUpdate' && events.at(-1)?.payload?.value).toMatchObject({ status: { state: TaskState.TASK_STATE_CANCELED } })
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
  it('with a token, the card is public and declares the bearer scheme; a task without the token or with a wrong one is refused with 401, the SDK client saying why on either binding; the right one is served', async () => {
    const w = await worker([{ reply: [{ text: 'authorised' }] }], { token: 's3cret' })
    const card = await fetch(`${w.server.url}/.well-known/agent-card.json`)
    expect(card.status).toBe(200)
    const body = (await card.json()) as { securitySchemes: Record<string, unknown>; securityRequirements: Array<{ schemes: Record<string, unknown> }> }
    // An HTTP authentication scheme, Bearer (as the SDK serves the card's scheme union).
    expect(JSON.stringify(body.securitySchemes.bearer)).toMatch(/"httpAuthSecurityScheme".*"scheme":"Bearer"/)
    expect(body.securityRequirements.map((requirement) => Object.keys(requirement.schemes))).toEqual([['bearer']])
    // The card is read without the token; the message is what is refused, and the client says why, not "An unexpected error occurred.".
    await expect(streamAll(await sdkClient(w.server.url), userMessage('hi'))).rejects.toThrow(/^401 Unauthorized: the request has no Authorization header; send Authorization: Bearer <token>/)
    await expect(streamAll(await sdkClient(w.server.url, 'nope'), userMessage('hi'))).rejects.toThrow(/^401 Unauthorized: the bearer token is wrong/)
    await expect((await sdkClient(w.server.url, 'nope')).sendMessage({ tenant: '', message: userMessage('hi'), configuration: undefined, metadata: undefined })).rejects.toThrow(/^401 Unauthorized: the bearer token is wrong/)
    await expect(streamAll(await sdkClient(w.server.url, 'nope', 'rest'), userMessage('hi'))).rejects.toThrow(/401 Unauthorized: the bearer token is wrong/)
    const raw = await fetch(`${w.server.url}${JSON_RPC_PATH}`, { method: 'POST', headers: { 'content-type': 'application/json', authorization: 'Bearer nope' }, body: JSON.stringify({ jsonrpc: '2.0', id: 1, method: 'SendMessage', params: {} }) })
    expect(raw.status).toBe(401)
    expect(raw.headers.get('www-authenticate')).toBe('Bearer')
    expect(((await raw.json()) as { error: { message: string } }).error.message).toMatch(/bearer token is wrong/)
    expect(w.sessions).toHaveLength(0)
    const client = await sdkClient(w.server.url, 's3cret')
    expect(artifactText(await streamAll(client, userMessage('hi')), 'answer')).toBe('authorised')
    expect(w.sessions).toHaveLength(1)
  })

  it('the Bearer scheme name is case-insensitive', async () => {
    const w = await worker([{ reply: [{ text: 'unused' }] }], { token: 's3cret' })
    const { port } = new URL(w.server.url)
    const getTask = (authorization: string) => rawRequest(w.server.url, JSON_RPC_PATH, 'POST', { host: `127.0.0.1:${port}`, 'content-type': 'application/json', 'a2a-version': '1.0', authorization }, JSON.stringify({ jsonrpc: '2.0', id: 1, method: 'GetTask', params: { id: 'no-such-task' } }))
    expect((await getTask('bearer s3cret')).status).toBe(200)
    expect((await getTask('BEARER s3cret')).status).toBe(200)
    const basic = await getTask('Basic s3cret')
    expect(basic.status).toBe(401)
    expect(JSON.parse(basic.body).error.message).toMatch(/does not use the Bearer scheme/)
  })

  it('a request addressed by another name (a DNS-rebinding page) or sent from another page (Origin) is refused with 403 before any task exists; the loopback names are served', async () => {
    const w = await worker([{ reply: [{ text: 'served' }] }])
    const { port } = new URL(w.server.url)
    const body = JSON.stringify({ jsonrpc: '2.0', id: 1, method: 'SendMessage', params: { message: { messageId: 'm1', role: 'ROLE_USER', parts: [{ text: 'hi' }] } } })
    const post = (headers: Record<string, string>) => rawRequest(w.server.url, JSON_RPC_PATH, 'POST', { 'content-type': 'application/json', 'a2a-version': '1.0', ...headers }, body)
    const rebound = await post({ host: `attacker.example:${port}` })
    expect(rebound.status).toBe(403)
    expect(JSON.parse(rebound.body).error).toMatch(/^the Host header "attacker\.example:\d+" is not an address of this server \(127\.0\.0\.1:\d+, localhost:\d+, \[::1\]:\d+\)/)
    const card = await rawRequest(w.server.url, '/.well-known/agent-card.json', 'GET', { host: `attacker.example:${port}` })
    expect(card.status).toBe(403)
    const fromPage = await post({ host: `127.0.0.1:${port}`, origin: 'http://attacker.example' })
    expect(fromPage.status).toBe(403)
    expect(JSON.parse(fromPage.body).error).toMatch(/the Origin "http:\/\/attacker\.example" is not this server's own/)
    expect(w.sessions).toHaveLength(0)
    for (const host of [`localhost:${port}`, `127.0.0.1:${port}`]) expect((await rawRequest(w.server.url, '/.well-known/agent-card.json', 'GET', { host, origin: `http://${host}` })).status).toBe(200)
    expect((await post({ host: `localhost:${port}` })).status).toBe(200)
    await until(() => w.sessions.length === 1)
  })

  it('a wildcard address without a public URL is refused: the card would send clients to themselves', async () => {
    const harness = await createHarness({ script: [{ reply: [{ text: 'unused' }] }] })
    try {
      for (const host of ['0.0.0.0', '::']) {
        const refused = serveA2a(harness.ctx, { host, token: 't' })
        await expect(refused).rejects.toThrow(A2aServerError)
        await expect(serveA2a(harness.ctx, { host, token: 't' })).rejects.toThrow(/needs a public URL.*--public-url/)
      }
    } finally {
      await harness.dispose()
    }
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

describe('the task store', () => {
  const context = new ServerCallContext()
  const task = (id: string, state: TaskState) => ({ id, contextId: 'c', status: { state, message: undefined, timestamp: new Date(0).toISOString() }, artifacts: [], history: [], metadata: undefined })

  it('keeps a bounded number of finished tasks, drops them after a while, and never drops one still working', async () => {
    let now = 0
    const store = new BoundedTaskStore({ ttlMs: 1000, maxFinished: 2 }, () => now)
    await store.save(task('working', TaskState.TASK_STATE_WORKING), context)
    for (const id of ['a', 'b', 'c']) await store.save(task(id, TaskState.TASK_STATE_COMPLETED), context)
    expect(await store.load('a', context)).toBeUndefined()
    expect((await store.load('b', context))?.id).toBe('b')
    expect(store.size).toBe(3)
    now = 5000
    expect(await store.load('c', context)).toBeUndefined()
    expect((await store.load('working', context))?.status?.state).toBe(TaskState.TASK_STATE_WORKING)
    expect(store.size).toBe(1)
  })

  it('hands out copies: a reader changing a loaded task does not change the stored one', async () => {
    const store = new BoundedTaskStore()
    await store.save(task('t', TaskState.TASK_STATE_WORKING), context)
    const loaded = (await store.load('t', context))!
    loaded.history = [userMessage('changed')]
    expect((await store.load('t', context))!.history).toEqual([])
    expect((await store.list({ tenant: '', contextId: '', status: TaskState.TASK_STATE_UNSPECIFIED, pageToken: '', statusTimestampAfter: undefined }, context)).tasks.map((listed) => listed.id)).toEqual(['t'])
  })
})

/** One HTTP request with headers fetch cannot set (Host): status and body. */
function rawRequest(base: string, path: string, method: string, headers: Record<string, string>, body?: string): Promise<{ status: number; body: string }> {
  const { hostname, port } = new URL(base)
  return new Promise((resolve, reject) => {
    const request = httpRequest({ host: hostname, port, path, method, headers: { ...headers, ...(body !== undefined && { 'content-length': String(Buffer.byteLength(body)) }) } }, (response) => {
      let text = ''
      response.setEncoding('utf8')
      response.on('data', (chunk: string) => (text += chunk))
      response.on('end', () => resolve({ status: response.statusCode ?? 0, body: text }))
    })
    request.once('error', reject)
    request.end(body)
  })
}
