import { requestOf as requestWithModel, startFakeAnthropicMessages, type FakeAnthropicMessages, type FakeMessagesAnswer, type RequestParts } from '@dsh/testkit'
import { afterEach } from 'vitest'
import { AnthropicAdapter, type AnthropicAdapterOptions } from '../src/index.js'

export { collect, failureOf, ofType, type RequestParts } from '@dsh/testkit'

export const requestOf = (parts: RequestParts = {}) => requestWithModel(parts, 'claude-x')

const servers: FakeAnthropicMessages[] = []
afterEach(async () => {
  await Promise.all(servers.splice(0).map((server) => server.close()))
})

export async function fakeServer(script: FakeMessagesAnswer[] = []): Promise<FakeAnthropicMessages> {
  const server = await startFakeAnthropicMessages(script)
  servers.push(server)
  return server
}

/** A fake Messages server (closed after the test) and an adapter pointed at it. */
export async function fakeEndpoint(script: FakeMessagesAnswer[] = [], options: AnthropicAdapterOptions = {}) {
  const server = await fakeServer(script)
  // No retries unless a test asks: most tests are about how one failure is reported.
  const adapter = new AnthropicAdapter({ name: 'fake', baseURL: server.url, apiKey: 'sk-ant-test', maxRetries: 0, ...options })
  return { server, adapter }
}

/** The JSON body of the `n`-th (1-based) messages request the server got. */
export function bodyOf(server: FakeAnthropicMessages, n: number): Record<string, unknown> {
  return server.messageRequests[n - 1]!.body as Record<string, unknown>
}
