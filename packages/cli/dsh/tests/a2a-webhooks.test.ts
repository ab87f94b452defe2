/**
 * Push notifications from a real `dsh a2a serve`: webhooks only where --webhook-allow and
 * --webhook-allow-network say, checked when a config is set; deliveries to a receiver on
 * 127.0.0.1 carry the client's authentication.
 */
import { createServer, type IncomingHttpHeaders } from 'node:http'
import type { AddressInfo } from 'node:net'
import { randomUUID } from 'node:crypto'
import { afterEach, describe, expect, it } from 'vitest'
import { Role, TaskState, type TaskPushNotificationConfig } from '@a2a-js/sdk'
import { ClientFactory, DefaultAgentCardResolver, JsonRpcTransportFactory } from '@a2a-js/sdk/client'
import { runDsh, tempDir } from './cli.js'
import { serve } from './a2a-serve-process.js'
import { until } from './processes.js'

const closers: Array<() => Promise<void>> = []
afterEach(async () => {
  for (const close of closers.splice(0)) await close()
})

/** A webhook receiver on 127.0.0.1 that takes every notification. */
async function receiver(): Promise<{ url: string; received: Array<{ path: string; headers: IncomingHttpHeaders; body: string }> }> {
  const received: Array<{ path: string; headers: IncomingHttpHeaders; body: string }> = []
  const server = createServer((request, response) => {
    let body = ''
    request.on('data', (chunk: Buffer) => (body += chunk))
    request.on('end', () => {
      received.push({ path: request.url ?? '', headers: request.headers, body })
      response.writeHead(200).end()
    })
  })
  await new Promise<void>((resolve) => server.listen(0, '127.0.0.1', resolve))
  closers.push(() => new Promise((resolve) => server.close(() => resolve())))
  return { url: `http://127.0.0.1:${(server.address() as AddressInfo).port}/hook`, received }
}

function client(url: string) {
  return new ClientFactory({ transports: [new JsonRpcTransportFactory({ fetchImpl: fetch })], cardResolver: new DefaultAgentCardResolver({ fetchImpl: fetch }) }).createFromUrl(url)
}

function message(text: string) {
  return { messageId: randomUUID(), contextId: '', taskId: '', role: Role.ROLE_USER, parts: [{ content: { $case: 'text' as const, value: text }, metadata: undefined, filename: '', mediaType: 'text/plain' }], metadata: undefined, extensions: [], referenceTaskIds: [] }
}

function config(url: string): TaskPushNotificationConfig {
  return { tenant: '', id: '', taskId: '', url, token: '', authentication: { scheme: 'Bearer', credentials: 'hook-secret' } }
}

describe('dsh a2a serve and push notifications', () => {
  it('calls an allowed webhook on each state change of a task, with the client\'s authentication; refuses others when they are set', async () => {
    const hook = await receiver()
    const served = await serve(['--model', 'scripted:examples/acp-child.yml', '--session-dir', tempDir(), '--webhook-allow', 'http://127.0.0.1:*/hook', '--webhook-allow-network', '127.0.0.1'])
    const a2a = await client(served.url)
    expect((await a2a.getAgentCard()).capabilities?.pushNotifications).toBe(true)
    const task = await a2a.sendMessage({ tenant: '', message: message('capital of France?'), configuration: { acceptedOutputModes: [], taskPushNotificationConfig: config(hook.url), returnImmediately: false }, metadata: undefined })
    expect('status' in task && task.status?.state).toBe(TaskState.TASK_STATE_COMPLETED)
    await until(() => hook.received.some((received) => received.body.includes('TASK_STATE_COMPLETED')))
    expect(hook.received.map((received) => received.headers.authorization)).toEqual(hook.received.map(() => 'Bearer hook-secret'))
    expect(JSON.parse(hook.received[0]!.body)).toHaveProperty('task.id', 'id' in task ? task.id : '')
    // Another path on the same receiver is outside the pattern: refused at once, never called.
    await expect(a2a.createTaskPushNotificationConfig({ ...config(hook.url.replace('/hook', '/elsewhere')), taskId: 'id' in task ? task.id : '' })).rejects.toThrow(/matches none of the URLs this worker may call/)
    expect(hook.received.map((received) => received.path)).toEqual(hook.received.map(() => '/hook'))
  })

  it('a malformed --webhook-allow pattern or network is one line and exit 2', async () => {
    const pattern = await runDsh(['a2a', 'serve', '--port', '0', '--model', 'scripted:examples/acp-child.yml', '--webhook-allow', 'ftp://x'])
    expect(pattern.code).toBe(2)
    expect(pattern.stderr.trim().split('\n')).toHaveLength(1)
    expect(pattern.stderr).toMatch(/webhook pattern "ftp:\/\/x" is not http\[s\]:\/\/HOST/)
    const network = await runDsh(['a2a', 'serve', '--port', '0', '--model', 'scripted:examples/acp-child.yml', '--webhook-allow-network', '10.0.0.0/99'])
    expect(network.code).toBe(2)
    expect(network.stderr).toMatch(/webhook network "10\.0\.0\.0\/99" is not an address or a CIDR/)
  })
})
