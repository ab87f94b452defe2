import { requestOf as requestWithModel, startFakeOpenAIChat, type FakeChatResponse, type FakeOpenAIChat, type RequestParts } from '@dsh/testkit'
import { afterEach } from 'vitest'
import { OpenAIChatAdapter, type OpenAIChatAdapterOptions } from '../src/index.js'

export { collect, failureOf, ofType, type RequestParts } from '@dsh/testkit'

export const requestOf = (parts: RequestParts = {}) => requestWithModel(parts, 'test-model')

const servers: FakeOpenAIChat[] = []
afterEach(async () => {
  await Promise.all(servers.splice(0).map((server) => server.close()))
})

/** A fake server (closed after the test) and an adapter pointed at it. */
export async function fakeEndpoint(script: FakeChatResponse[] = [], options: OpenAIChatAdapterOptions = {}) {
  const server = await startFakeOpenAIChat(script)
  servers.push(server)
  // No retries unless a test asks: most tests are about how one failure is reported.
  const adapter = new OpenAIChatAdapter({ name: 'fake', baseURL: server.url, apiKey: 'sk-test', maxRetries: 0, ...options })
  return { server, adapter }
}
