import { ClientFactory, DefaultAgentCardResolver, JsonRpcTransportFactory, RestTransportFactory, type Client } from '@a2a-js/sdk/client'
import { Role, type Message, type StreamResponse } from '@a2a-js/sdk'
import { randomUUID } from 'node:crypto'

/** A dsh worker in this process (see `@dsh/testkit/a2a`). */
export { startA2aWorker as startWorker, type A2aWorker as Worker } from '@dsh/testkit/a2a'

/** The SDK's own client for `url`, with a bearer token when given. */
/** The SDK's client over the JSON-RPC binding (default) or the HTTP+JSON one. */
export function sdkClient(url: string, token?: string, binding: 'jsonrpc' | 'rest' = 'jsonrpc'): Promise<Client> {
  const fetchImpl: typeof fetch = token === undefined ? fetch : (input, init) => fetch(input, { ...init, headers: { ...(init?.headers as Record<string, string>), Authorization: `Bearer ${token}` } })
  const transport = binding === 'rest' ? new RestTransportFactory({ fetchImpl }) : new JsonRpcTransportFactory({ fetchImpl })
  return new ClientFactory({ transports: [transport], cardResolver: new DefaultAgentCardResolver({ fetchImpl }) }).createFromUrl(url)
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
