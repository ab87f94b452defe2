/**
 * Push notifications: the config methods over the SDK client, deliveries to a real webhook
 * receiver on 127.0.0.1 (allowed explicitly, as loopback is refused otherwise), retries,
 * and webhooks that fail or hang never touching the task.
 */
import { afterEach, describe, expect, it } from 'vitest'
import type { IncomingHttpHeaders } from 'node:http'
import { TaskState, type TaskPushNotificationConfig } from '@a2a-js/sdk'
import type { A2aServerOptions } from '@dsh/a2a-server'
import { WebhookPolicy } from '../src/webhook-policy.js'
import { startLoopbackServer, untilStopped, type LoopbackServer } from '@dsh/testkit'
import { gateTool } from '@dsh/testkit/harness'
import { finalState, sdkClient, startWorker, streamAll, until, userMessage, type Worker } from './helpers.js'

const cleanups: Array<() => Promise<void>> = []
afterEach(async () => {
  for (const cleanup of cleanups.splice(0).reverse()) await cleanup()
})

interface Received {
  headers: IncomingHttpHeaders
  body: Record<string, unknown>
}

/** A webhook receiver on 127.0.0.1: `answer` says what each request gets (a status, or `hang`). */
async function receiver(answer: (index: number) => number | 'hang' = () => 200): Promise<LoopbackServer & { received: Received[] }> {
  const received: Received[] = []
  const server = await startLoopbackServer(async (req, res, body, stop) => {
    const index = received.length
    received.push({ headers: req.headers, body: JSON.parse(body) as Record<string, unknown> })
    const status = answer(index)
    if (status === 'hang') return untilStopped(stop)
    res.writeHead(status).end()
  })
  cleanups.push(() => server.close())
  return Object.assign(server, { received })
}

/** Loopback webhooks allowed explicitly; quick retries for the tests. */
const ALLOW_LOOPBACK: NonNullable<A2aServerOptions['webhooks']> = { allow: ['http://127.0.0.1:*'], allowNetworks: ['127.0.0.1/32'], backoffMs: 20, timeoutMs: 300 }

async function worker(script: Parameters<typeof startWorker>[0], webhooks: A2aServerOptions['webhooks'] = ALLOW_LOOPBACK): Promise<Worker> {
  const started = await startWorker(script, { webhooks })
  cleanups.push(() => started.dispose())
  return started
}

function pushConfig(url: string, extra: Partial<TaskPushNotificationConfig> = {}): TaskPushNotificationConfig {
  return { tenant: '', id: '', taskId: '', url, token: '', authentication: { scheme: 'Bearer', credentials: 'hook-secret' }, ...extra }
}

/** The state a received notification reports. */
function stateOf(received: Received): string | undefined {
  const task = received.body.task as { status?: { state?: string } } | undefined
  const update = received.body.statusUpdate as { status?: { state?: string } } | undefined
  return (task ?? update)?.status?.state
}

describe('push notifications', () => {
  it('each state change of a task is POSTed to its webhook as a StreamResponse with the configured authentication, in order, and nothing else is', async () => {
    const hook = await receiver()
    const w = await worker([{ reply: [{ text: 'a long answer streamed in pieces' }] }])
    const client = await sdkClient(w.server.url)
    expect((await client.getAgentCard()).capabilities?.pushNotifications).toBe(true)
    const task = await client.sendMessage({ tenant: '', message: userMessage('hi'), configuration: { acceptedOutputModes: [], taskPushNotificationConfig: pushConfig(`${hook.origin}/hook`, { token: 'task-token' }), returnImmediately: false }, metadata: undefined })
    expect('status' in task && task.status?.state).toBe(TaskState.TASK_STATE_COMPLETED)
    await until(() => hook.received.length === 3)
    expect(hook.received.map(stateOf)).toEqual(['TASK_STATE_SUBMITTED', 'TASK_STATE_WORKING', 'TASK_STATE_COMPLETED'])
    expect(Object.keys(hook.received[0]!.body)).toEqual(['task'])
    expect(Object.keys(hook.received[2]!.body)).toEqual(['statusUpdate'])
    for (const { headers } of hook.received) {
      expect(headers.authorization).toBe('Bearer hook-secret')
      expect(headers['x-a2a-notification-token']).toBe('task-token')
      expect(headers['content-type']).toMatch(/^application\/(a2a\+)?json/)
    }
  })

  it('the config methods: create, get, list and delete, for a task this worker knows', async () => {
    const w = await worker([{ reply: [{ text: 'ok' }] }])
    const client = await sdkClient(w.server.url)
    const events = await streamAll(client, userMessage('hi'))
    const taskId = events[0]?.payload?.$case === 'task' ? events[0].payload.value.id : ''
    const created = await client.createTaskPushNotificationConfig(pushConfig('http://127.0.0.1:9/hook', { taskId, id: 'mine' }))
    expect(created).toMatchObject({ id: 'mine', taskId, url: 'http://127.0.0.1:9/hook' })
    expect(await client.getTaskPushNotificationConfig({ tenant: '', taskId, id: 'mine' })).toMatchObject({ id: 'mine', url: 'http://127.0.0.1:9/hook' })
    const unnamed = await client.createTaskPushNotificationConfig(pushConfig('http://127.0.0.1:9/other', { taskId }))
    expect(unnamed.id).not.toBe('')
    expect((await client.listTaskPushNotificationConfig({ tenant: '', taskId, pageSize: 0, pageToken: '' })).configs.map((config) => config.id).sort()).toEqual(['mine', unnamed.id].sort())
    await client.deleteTaskPushNotificationConfig({ tenant: '', taskId, id: 'mine' })
    await client.deleteTaskPushNotificationConfig({ tenant: '', taskId, id: 'mine' })
    await expect(client.getTaskPushNotificationConfig({ tenant: '', taskId, id: 'mine' })).rejects.toThrow(/not found/)
    await expect(client.createTaskPushNotificationConfig(pushConfig('http://127.0.0.1:9/hook', { taskId: 'no-such-task' }))).rejects.toThrow(/not found/i)
  })

  it('a webhook URL outside the allow-list, at a loopback or private address not allowed, or with credentials in it is refused when set; nothing is stored or called', async () => {
    const hook = await receiver()
    const w = await worker([{ reply: [{ text: 'ok' }] }], { allow: ['http://127.0.0.1:*', 'http://10.1.2.3', 'http://localhost:*', `${hook.origin.replace('127.0.0.1', '[::ffff:127.0.0.1]')}`] })
    const client = await sdkClient(w.server.url)
    const events = await streamAll(client, userMessage('hi'))
    const taskId = events[0]?.payload?.$case === 'task' ? events[0].payload.value.id : ''
    const refusals: Array<[string, RegExp]> = [
      ['https://evil.example/hook', /matches none of the URLs this worker may call/],
      [`${hook.origin}/hook`, /points at 127\.0\.0\.1, an address outside the public internet/],
      ['http://10.1.2.3/hook', /points at 10\.1\.2\.3/],
      [`http://localhost:${hook.port}/hook`, /points at 127\.0\.0\.1/],
      [`http://[::ffff:127.0.0.1]:${hook.port}/hook`, /outside the public internet/],
      [`http://user:pass@127.0.0.1:${hook.port}/hook`, /carries credentials/],
      ['not a url', /is not a URL/],
    ]
    for (const [url, why] of refusals) {
      await expect(client.createTaskPushNotificationConfig(pushConfig(url, { taskId })), url).rejects.toThrow(why)
    }
    // Inline with a message: refused before the task begins.
    await expect(client.sendMessage({ tenant: '', message: userMessage('again'), configuration: { acceptedOutputModes: [], taskPushNotificationConfig: pushConfig(`${hook.origin}/hook`), returnImmediately: false }, metadata: undefined })).rejects.toThrow(/outside the public internet/)
    expect((await client.listTaskPushNotificationConfig({ tenant: '', taskId, pageSize: 0, pageToken: '' })).configs).toEqual([])
    expect(w.sessions).toHaveLength(1)
    expect(hook.received).toEqual([])
  })

  it('without an allow-list the card says no push notifications, and the config methods say so', async () => {
    const w = await worker([{ reply: [{ text: 'ok' }] }], {})
    const client = await sdkClient(w.server.url)
    expect((await client.getAgentCard()).capabilities?.pushNotifications).toBe(false)
    const events = await streamAll(client, userMessage('hi'))
    const taskId = events[0]?.payload?.$case === 'task' ? events[0].payload.value.id : ''
    // The SDK's client reads the card and does not ask; a client that asks anyway hears it from the server.
    expect(() => client.createTaskPushNotificationConfig(pushConfig('https://hooks.example.com/a2a', { taskId }))).toThrow(/Push Notification is not supported/)
    const answer = await fetch(`${w.server.url}/a2a/jsonrpc`, {
      method: 'POST',
      headers: { 'content-type': 'application/json', 'a2a-version': '1.0' },
      body: JSON.stringify({ jsonrpc: '2.0', id: 1, method: 'CreateTaskPushNotificationConfig', params: { taskId, url: 'https://hooks.example.com/a2a' } }),
    })
    expect(((await answer.json()) as { error?: { code: number } }).error?.code).toBe(-32003)
  })

  it('a webhook answering 500 is tried again with backoff until it takes the notification; a webhook that always fails is given up after the attempts, and the task is unharmed', async () => {
    const flaky = await receiver((index) => (index < 2 ? 500 : 200))
    const broken = await receiver(() => 500)
    const w = await worker([{ reply: [{ call: { tool: 'gate', args: {} } }, { text: 'ok' }] }], { ...ALLOW_LOOPBACK, attempts: 3 })
    const gate = gateTool(w.harness)
    const client = await sdkClient(w.server.url)
    let taskId = ''
    const streamed = streamAll(client, userMessage('hi'), (event) => {
      if (event.payload?.$case === 'task') taskId = event.payload.value.id
    })
    await gate.entered
    // Registered while it runs: each webhook is told of the changes from then on.
    await client.createTaskPushNotificationConfig(pushConfig(`${flaky.origin}/hook`, { taskId, id: 'flaky' }))
    await client.createTaskPushNotificationConfig(pushConfig(`${broken.origin}/hook`, { taskId, id: 'broken' }))
    gate.release()
    expect(finalState(await streamed)).toBe(TaskState.TASK_STATE_COMPLETED)
    // The final state at least: retried until the third attempt took it.
    await until(() => flaky.received.some((received, index) => index >= 2 && stateOf(received) === 'TASK_STATE_COMPLETED'))
    await until(() => broken.received.filter((received) => stateOf(received) === 'TASK_STATE_COMPLETED').length === 3)
    await new Promise((resolve) => setTimeout(resolve, 200))
    // Bounded: three attempts per notification, no more.
    expect(broken.received.filter((received) => stateOf(received) === 'TASK_STATE_COMPLETED')).toHaveLength(3)
    expect((await client.getTask({ tenant: '', id: taskId, historyLength: undefined })).status?.state).toBe(TaskState.TASK_STATE_COMPLETED)
  })

  it('a webhook that hangs is cut after its timeout; the task completes at its own pace and the next task is not held up', async () => {
    const hanging = await receiver(() => 'hang')
    const w = await worker([{ reply: [{ text: 'first' }, { text: 'second' }] }], { ...ALLOW_LOOPBACK, attempts: 1 })
    const client = await sdkClient(w.server.url)
    const first = await client.sendMessage({ tenant: '', message: userMessage('hi'), configuration: { acceptedOutputModes: [], taskPushNotificationConfig: pushConfig(`${hanging.origin}/hook`), returnImmediately: false }, metadata: undefined })
    expect('status' in first && first.status?.state).toBe(TaskState.TASK_STATE_COMPLETED)
    expect(finalState(await streamAll(client, userMessage('again')))).toBe(TaskState.TASK_STATE_COMPLETED)
    // Each hung attempt was cut (the receiver saw the next one).
    await until(() => hanging.received.length === 3)
  })

  it('the guard resolves names when it calls: a name that resolves outside the public internet is not connected to', async () => {
    const policy = new WebhookPolicy({ allow: ['http://localhost:*'] })
    const refused = await new Promise<NodeJS.ErrnoException | null>((resolve) => policy.lookup('localhost', {}, (error) => resolve(error)))
    expect(refused?.code).toBe('EWEBHOOKREFUSED')
    expect(refused?.message).toMatch(/localhost resolves to 127\.0\.0\.1.*not allowed/)
    const allowed = new WebhookPolicy({ allow: ['http://localhost:*'], allowNetworks: ['127.0.0.0/8'] })
    const address = await new Promise<string>((resolve, reject) => allowed.lookup('localhost', { family: 4 }, (error, found) => (error ? reject(error) : resolve(found as string))))
    expect(address).toBe('127.0.0.1')
    // localhost is allowed when one of its addresses is: the lookup keeps that one.
    expect(allowed.refusal({ url: 'http://localhost:8080/hook' })).toBeUndefined()
    expect(new WebhookPolicy({ allow: ['http://localhost.:*'] }).refusal({ url: 'http://localhost.:8080/hook' })).toMatch(/points at 127\.0\.0\.1/)
    expect(policy.addressAllowed('169.254.169.254')).toBe(false)
    expect(policy.addressAllowed('::ffff:a9fe:a9fe')).toBe(false)
    expect(policy.addressAllowed('fd00::1')).toBe(false)
    expect(policy.addressAllowed('93.184.216.34')).toBe(true)
    expect(() => new WebhookPolicy({ allow: ['ftp://x'] })).toThrow(/is not http\[s\]:\/\/HOST/)
    expect(() => new WebhookPolicy({ allowNetworks: ['10.0.0.0/33'] })).toThrow(/is not an address or a CIDR/)
  })
})
