import { createServer, type Server } from 'node:http'
import type { AddressInfo } from 'node:net'
import express from 'express'
import type { AgentCard } from '@a2a-js/sdk'
import { DefaultRequestHandler, InMemoryTaskStore, type AgentExecutor } from '@a2a-js/sdk/server'
import { agentCardHandler, jsonRpcHandler, UserBuilder } from '@a2a-js/sdk/server/express'
import { legacyAgentCardRouter } from '@a2a-js/sdk/compat/v0_3/server/express'
import { createHarness, type Harness } from '@dsh/testkit/harness'
import { text } from '@dsh/llm'
import type { Agent } from '@dsh/agent'
import { SubagentService, type SubagentRequest } from '@dsh/subagent'
import { A2aPlugin, type A2aProviderConfig } from '@dsh/subagent-a2a'

export interface Parent {
  harness: Harness
  parent: Agent
  request(prompt: string, extra?: Partial<SubagentRequest>): SubagentRequest
}

/** A real harness with the subagent service and one a2a provider; the parent is a real agent. */
export async function parentWith(config: Partial<A2aProviderConfig> & { urls: string[] }): Promise<Parent> {
  const harness = await createHarness({ script: [{ reply: [{ text: 'unused' }] }] })
  await harness.plugin(SubagentService)
  await harness.plugin(A2aPlugin, config)
  const parent = await harness.agent()
  return {
    harness,
    parent,
    request: (prompt, extra = {}) => ({ prompt: [text(prompt)], parent, signal: new AbortController().signal, ...extra }),
  }
}

/** A dsh worker in this process (see `@dsh/testkit/a2a`). */
export { startA2aWorker as dshWorker, type A2aWorker as DshWorker } from '@dsh/testkit/a2a'

export interface PlainServer {
  url: string
  http: Server
  close(): Promise<void>
}

/** An HTTP server on 127.0.0.1 with the given express app. */
export async function listenOnLoopback(app: express.Express): Promise<PlainServer> {
  const http = createServer(app)
  await new Promise<void>((resolve) => http.listen(0, '127.0.0.1', resolve))
  const url = `http://127.0.0.1:${(http.address() as AddressInfo).port}`
  return {
    url,
    http,
    close: () => {
      http.closeAllConnections()
      return new Promise((resolve) => http.close(() => resolve()))
    },
  }
}

/** An agent built on the SDK's own server classes and nothing of dsh: `executor` is its logic; `capabilities` change its card's. */
export async function sdkAgent(executor: AgentExecutor, capabilities: Partial<AgentCard['capabilities']> = {}): Promise<PlainServer> {
  const app = express()
  const server = await listenOnLoopback(app)
  const card: AgentCard = {
    name: 'sdk-agent',
    description: 'an agent on the A2A SDK alone',
    supportedInterfaces: [{ url: `${server.url}/rpc`, protocolBinding: 'JSONRPC', tenant: '', protocolVersion: '1.0' }],
    provider: undefined,
    version: '1.0.0',
    capabilities: { streaming: true, pushNotifications: false, extensions: [], ...capabilities },
    securitySchemes: {},
    securityRequirements: [],
    defaultInputModes: ['text/plain'],
    defaultOutputModes: ['text/plain'],
    skills: [],
    signatures: [],
  }
  const requestHandler = new DefaultRequestHandler(card, new InMemoryTaskStore(), executor)
  app.use('/.well-known/agent-card.json', agentCardHandler({ agentCardProvider: requestHandler }))
  app.use('/rpc', jsonRpcHandler({ requestHandler, userBuilder: UserBuilder.noAuthentication }))
  return server
}

/**
 * An agent of the 0.3 protocol, on the SDK's own pieces: its card in the 0.3 shape (the
 * SDK's translation, whatever version a client asks for) offering JSON-RPC in 0.3 alone,
 * and the SDK's 0.3 JSON-RPC handler. `methods` records each JSON-RPC method called.
 */
export async function legacyAgent(executor: AgentExecutor): Promise<PlainServer & { methods: string[] }> {
  const app = express()
  const server = await listenOnLoopback(app)
  const card: AgentCard = {
    name: 'legacy-agent',
    description: 'an agent that speaks A2A 0.3',
    supportedInterfaces: [{ url: `${server.url}/rpc`, protocolBinding: 'JSONRPC', tenant: '', protocolVersion: '0.3' }],
    provider: undefined,
    version: '0.3.0',
    capabilities: { streaming: true, pushNotifications: false, extensions: [] },
    securitySchemes: {},
    securityRequirements: [],
    defaultInputModes: ['text/plain'],
    defaultOutputModes: ['text/plain'],
    skills: [],
    signatures: [],
  }
  const requestHandler = new DefaultRequestHandler(card, new InMemoryTaskStore(), executor)
  const methods: string[] = []
  app.use('/.well-known/agent-card.json', (request, _response, next) => {
    // A 0.3 agent knows no A2A-Version: its card is the 0.3 one for everybody.
    delete request.headers['a2a-version']
    next()
  }, legacyAgentCardRouter({ agentCardProvider: requestHandler }))
  app.use('/rpc', express.json(), (request, _response, next) => {
    methods.push(String((request.body as { method?: unknown }).method))
    next()
  }, jsonRpcHandler({ requestHandler, userBuilder: UserBuilder.noAuthentication, legacyCompat: { enabled: true } }))
  return Object.assign(server, { methods })
}

/** Resolves once `check` holds (the test timeout bounds it). */
export async function until(check: () => boolean): Promise<void> {
  while (!check()) await new Promise((resolve) => setTimeout(resolve, 10))
}
