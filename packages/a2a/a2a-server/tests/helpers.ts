import { createHarness, type Harness } from '@dsh/testkit/harness'
import type { Script } from '@dsh/llm-scripted'
import type { Session } from '@dsh/session'
import { ClientFactory, DefaultAgentCardResolver, JsonRpcTransportFactory, type Client } from '@a2a-js/sdk/client'
import { Role, type Message, type StreamResponse } from '@a2a-js/sdk'
import { randomUUID } from 'node:crypto'
import { serveA2a, type A2aServer, type A2aServerOptions } from '@dsh/a2a-server'

export interface Worker {
  harness: Harness
  server: A2aServer
  /** Every session the worker created, in order. */
  sessions: Session[]
  dispose(): Promise<void>
}

/** A dsh worker in this process: a real harness playing `script`, behind a real A2A server on 127.0.0.1. */
export async function startWorker(script: Script, options: A2aServerOptions = {}): Promise<Worker> {
  const harness = await createHarness({ script })
  const sessions: Session[] = []
  harness.ctx.sessions.addObserver({ created: (session) => void sessions.push(session) })
  const server = await serveA2a(harness.ctx, options)
  return {
    harness,
    server,
    sessions,
    dispose: async () => {
      await server.close()
      await harness.dispose()
    },
  }
}

/** The SDK's own client for `url`, with a bearer token when given. */
export function sdkClient(url: string, token?: string): Promise<Client> {
  const fetchImpl: typeof fetch = token === undefined ? fetch : (input, init) => fetch(input, { ...init, headers: { ...(init?.headers as Record<string, string>), Authorization: `Bearer ${token}` } })
  return new ClientFactory({ transports: [new JsonRpcTransportFactory({ fetchImpl })], cardResolver: new DefaultAgentCardResolver({ fetchImpl }) }).createFromUrl(url)
}

export function userMessage(text: string, metadata?: Record<string, unknown>): Message {
  return {
    messageId: randomUUID(),
    contextId: '',
    taskId: '',
    role: Role.ROLE_USER,
    parts: [{ content: { $case: 'text', value: text }, metadata: undefined, filename: '', mediaType: 'text/plain' }],
    metadata,
    extensions: [],
    referenceTaskIds: [],
  }
}

/** Every event of a streamed message, until the stream ends. */
export async function streamAll(client: Client, message: Message, onEvent?: (event: StreamResponse) => void): Promise<StreamResponse[]> {
  const events: StreamResponse[] = []
  for await (const event of client.sendMessageStream({ tenant: '', message, configuration: undefined, metadata: undefined })) {
    events.push(event)
    onEvent?.(event)
  }
  return events
}

export function finalState(events: StreamResponse[]): number | undefined {
  let state: number | undefined
  for (const { payload } of events) {
    if (payload?.$case === 'task') state = payload.value.status?.state
    if (payload?.$case === 'statusUpdate') state = payload.value.status?.state
  }
  return state
}

export function artifactText(events: StreamResponse[], artifactId: string): string {
  let text = ''
  for (const { payload } of events) {
    if (payload?.$case !== 'artifactUpdate' || payload.value.artifact?.artifactId !== artifactId) continue
    const chunk = payload.value.artifact.parts.map((part) => (part.content?.$case === 'text' ? part.content.value : '')).join('')
    text = payload.value.append ? text + chunk : chunk
  }
  return text
}

/** Resolves once `check` holds, polling on the event loop (no wall-clock bound: the test timeout is the bound). */
export async function until(check: () => boolean): Promise<void> {
  while (!check()) await new Promise((resolve) => setTimeout(resolve, 10))
}
