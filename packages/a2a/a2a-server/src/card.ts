import type { AgentCard, AgentSkill } from '@a2a-js/sdk'
import { duplicateInterfacesForLegacy } from '@a2a-js/sdk/compat/v0_3'
import { CONTEXTS_EXTENSION } from './contexts.js'

/** Where the agent card is served: public, even with a token (`requireBearer`). */
export const AGENT_CARD_PATH = '/.well-known/agent-card.json'
/** Where the JSON-RPC endpoint is mounted under the server's base URL. */
export const JSON_RPC_PATH = '/a2a/jsonrpc'
/** Where the HTTP+JSON (REST) binding is mounted under the server's base URL. */
export const REST_PATH = '/a2a/rest'

/**
 * The extension by which the card promises keep-alive status updates: `params.intervalMs`
 * is how often a working (or waiting) task sends one. `@dsh/subagent-a2a` reads it to tell
 * a silent worker from a busy one; other clients may ignore it (it is not required).
 */
export const KEEPALIVE_EXTENSION = 'urn:dsh:a2a:keepalive:v1'

/** The card a client reads from `/.well-known/agent-card.json`: JSON-RPC and HTTP+JSON interfaces in 1.0 and 0.3, streaming, text in and out. */
export function dshAgentCard(options: { publicUrl: string; version: string; name: string; bearer: boolean; keepAliveMs: number; skills?: readonly AgentSkill[]; namedContexts?: boolean; pushNotifications?: boolean }): AgentCard {
  const card: AgentCard = {
    name: options.name,
    description: 'A dsh agent: each task runs as one dsh session until the agent is quiet (its turn and the turns its background work starts).',
    // Each binding in 1.0, then the same URL in 0.3 (the SDK's compatibility layer serves both):
    // a client taking the first interface of a binding gets 1.0.
    supportedInterfaces: duplicateInterfacesForLegacy(
      [
        { url: `${options.publicUrl}${JSON_RPC_PATH}`, protocolBinding: 'JSONRPC', tenant: '', protocolVersion: '1.0' },
        { url: `${options.publicUrl}${REST_PATH}`, protocolBinding: 'HTTP+JSON', tenant: '', protocolVersion: '1.0' },
      ],
      ['JSONRPC', 'HTTP+JSON'],
    ),
    provider: undefined,
    version: options.version,
    capabilities: {
      streaming: true,
      // On when the operator allows some webhook URL (`webhook-policy.ts`); off, the config methods answer PushNotificationNotSupportedError.
      pushNotifications: options.pushNotifications === true,
      extensions: [
        { uri: KEEPALIVE_EXTENSION, description: 'While a task waits or works, a status update repeating its state is sent every intervalMs milliseconds (metadata.dsh.keepAlive = true).', required: false, params: { intervalMs: options.keepAliveMs } },
        // Contexts are stored sessions: a client may name a new one (contexts.ts).
        ...(options.namedContexts
          ? [{ uri: CONTEXTS_EXTENSION, description: 'A context is a stored conversation: a message naming a known contextId continues it, one naming an unknown contextId opens it under that name, unless its metadata.dsh.existingContext is true: then an unknown contextId is refused.', required: false, params: undefined }]
          : []),
      ],
    },
    securitySchemes: {},
    securityRequirements: [],
    defaultInputModes: ['text/plain'],
    defaultOutputModes: ['text/plain'],
    skills: [
      {
        id: 'dsh-prompt',
        name: 'prompt',
        description: 'Do the task the text asks for, with the tools this dsh is composed with.',
        tags: ['dsh'],
        examples: [],
        inputModes: ['text/plain'],
        outputModes: ['text/plain'],
        securityRequirements: [],
      },
      // Agent definitions (`skills.ts`): a message's metadata.skill picks one.
      ...(options.skills ?? []),
    ],
    signatures: [],
  }
  if (options.bearer) {
    // The card is public: this is how a client learns that every other request needs the token.
    card.securitySchemes = { bearer: { scheme: { $case: 'httpAuthSecurityScheme', value: { description: 'The token the worker was started with (dsh a2a serve --token-env NAME), on every request but the card', scheme: 'Bearer', bearerFormat: '' } } } }
    card.securityRequirements = [{ schemes: { bearer: { list: [] } } }]
  }
  return card
}
