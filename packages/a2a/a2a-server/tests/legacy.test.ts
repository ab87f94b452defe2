/**
 * Clients of the 0.3 protocol: the SDK's 0.3 transports (the 0.3 wire over JSON-RPC and
 * HTTP+JSON) and bare 0.3 JSON-RPC requests are served by the same tasks and sessions as
 * 1.0 clients; a 0.3 message missing what it needs gets a clear error and makes nothing.
 */
import { randomUUID } from 'node:crypto'
import { afterEach, describe, expect, it } from 'vitest'
import { TaskState } from '@a2a-js/sdk'
import { LegacyJsonRpcTransport, LegacyRestTransport } from '@a2a-js/sdk/compat/v0_3/client'
import { startLoopbackServer } from '@dsh/testkit'
import { artifactText, finalState, startWorker, until, userMessage, type Worker } from './helpers.js'

const workers: Worker[] = []
afterEach(async () => {
  await Promise.all(workers.splice(0).map((worker) => worker.dispose()))
})

async function worker(): Promise<Worker> {
  const started = await startWorker([{ reply: [{ text: 'Paris is the capital.' }] }])
  workers.push(started)
  return started
}

/** A JSON-RPC request as a 0.3 client sends it: no A2A-Version header. */
async function rpc03(url: string, method: string, params: unknown): Promise<{ result?: Record<string, unknown>; error?: { code: number; message: string } }> {
  const answer = await fetch(`${url}/a2a/jsonrpc`, { method: 'POST', headers: { 'content-type': 'application/json' }, body: JSON.stringify({ jsonrpc: '2.0', id: 1, method, params }) })
  return (await answer.json()) as { result?: Record<string, unknown>; error?: { code: number; message: string } }
}

function message03(parts: unknown[], extra: Record<string, unknown> = {}) {
  return { kind: 'message', messageId: randomUUID(), role: 'user', parts, ...extra }
}

describe('0.3 clients', () => {
  it('the SDK\'s 0.3 JSON-RPC transport runs a streamed task to its answer, as one dsh session', async () => {
    const w = await worker()
    const transport = new LegacyJsonRpcTransport({ endpoint: `${w.server.url}/a2a/jsonrpc` })
    const events = []
    for await (const event of transport.sendMessageStream({ tenant: '', message: userMessage('capital of France?'), configuration: undefined, metadata: undefined })) events.push(event)
    expect(finalState(events)).toBe(TaskState.TASK_STATE_COMPLETED)
    expect(artifactText(events, 'answer')).toBe('Paris is the capital.')
    expect(w.sessions).toHaveLength(1)
    expect(w.sessions[0]!.header.origin).toBe('a2a')
  })

  it('the SDK\'s 0.3 HTTP+JSON transport is served too', async () => {
    const w = await worker()
    const transport = new LegacyRestTransport({ endpoint: `${w.server.url}/a2a/rest` })
    const task = await transport.sendMessage({ tenant: '', message: userMessage('capital of France?'), configuration: undefined, metadata: undefined })
    expect('status' in task && task.status?.state).toBe(TaskState.TASK_STATE_COMPLETED)
    expect(w.sessions).toHaveLength(1)
  })

  it('a bare 0.3 message/send (no A2A-Version) gets a 0.3 task back', async () => {
    const w = await worker()
    const { result, error } = await rpc03(w.server.url, 'message/send', { message: message03([{ kind: 'text', text: 'capital of France?' }]) })
    expect(error).toBeUndefined()
    expect(result).toMatchObject({ kind: 'task', status: { state: 'completed' } })
    const artifacts = result!.artifacts as Array<{ name: string; parts: Array<{ kind: string; text: string }> }>
    expect(artifacts.map((artifact) => artifact.parts.map((part) => part.text).join(''))).toEqual(['Paris is the capital.'])
  })

  it('a 0.3 message missing what it needs is refused with an invalid-params error naming it, and makes nothing', async () => {
    const w = await worker()
    const refusals: Array<[unknown, RegExp]> = [
      [{ message: { kind: 'message', role: 'user', parts: [{ kind: 'text', text: 'hi' }] } }, /message\.messageId is required/],
      [{ message: { kind: 'message', messageId: 'm-1', parts: [{ kind: 'text', text: 'hi' }] } }, /message\.role must be/],
      [{ message: { kind: 'message', messageId: 'm-2', role: 'user' } }, /message\.parts must be an array/],
      [{ message: message03([{ kind: 'text' }]) }, /message\.parts\[0\] is a text part without its text/],
      [{ message: message03([{ kind: 'picture' }]) }, /Invalid v0\.3 part kind: picture/],
      [{}, /message must be an object/],
    ]
    for (const [params, why] of refusals) {
      const { result, error } = await rpc03(w.server.url, 'message/send', params)
      expect(result, JSON.stringify(params)).toBeUndefined()
      expect(error?.code, JSON.stringify(params)).toBe(-32602)
      expect(error?.message, JSON.stringify(params)).toMatch(why)
    }
    expect(w.sessions).toEqual([])
    expect(w.server.taskCount).toBe(0)
  })

  it('a push config a 0.3 client sends with its message is notified in the 0.3 shape, with its authentication', async () => {
    const received: Array<{ authorization?: string; body: Record<string, unknown> }> = []
    const hook = await startLoopbackServer(async (req, res, body) => {
      received.push({ authorization: req.headers.authorization, body: JSON.parse(body) as Record<string, unknown> })
      res.writeHead(200).end()
    })
    const w = await startWorker([{ reply: [{ text: 'Paris is the capital.' }] }], { webhooks: { allow: ['http://127.0.0.1:*'], allowNetworks: ['127.0.0.1'] } })
    workers.push(w)
    try {
      const pushNotificationConfig = { url: `${hook.origin}/hook`, authentication: { schemes: ['Bearer'], credentials: 'old-secret' } }
      const { result, error } = await rpc03(w.server.url, 'message/send', { message: message03([{ kind: 'text', text: 'capital of France?' }]), configuration: { pushNotificationConfig } })
      expect(error).toBeUndefined()
      // A configuration without `blocking` does not wait (0.3's default): the task comes back as it starts.
      expect(result).toMatchObject({ kind: 'task' })
      await until(() => received.some(({ body }) => (body.status as { state?: string } | undefined)?.state === 'completed'))
      expect(received.every(({ body }) => body.kind === 'task' || body.kind === 'status-update')).toBe(true)
      expect(received.map(({ authorization }) => authorization)).toEqual(received.map(() => 'Bearer old-secret'))
    } finally {
      await hook.close()
    }
  })

  it('the card: 1.0 unless a client asks for 0.3, and it lists both versions of each binding', async () => {
    const w = await worker()
    const card = (await (await fetch(`${w.server.url}/.well-known/agent-card.json`)).json()) as Record<string, unknown>
    expect(card.url).toBeUndefined()
    expect((card.supportedInterfaces as Array<{ protocolVersion: string }>).map((entry) => entry.protocolVersion)).toEqual(['1.0', '1.0', '0.3', '0.3'])
    const legacy = (await (await fetch(`${w.server.url}/.well-known/agent-card.json`, { headers: { 'a2a-version': '0.3' } })).json()) as Record<string, unknown>
    expect(legacy).toMatchObject({ url: `${w.server.url}/a2a/jsonrpc`, preferredTransport: 'JSONRPC' })
    expect(legacy.protocolVersion).toMatch(/^0\.3/)
  })
})
