import type { AgentCard } from '@a2a-js/sdk'

/** Where the JSON-RPC endpoint is mounted under the server's base URL. */
export const JSON_RPC_PATH = '/a2a/jsonrpc'

/** The card a client reads from `/.well-known/agent-card.json`: one JSON-RPC interface, streaming, text in and out. */
export function dshAgentCard(options: { publicUrl: string; version: string; name: string; bearer: boolean }): AgentCard {
  const card: AgentCard = {
    name: options.name,
    description: 'A dsh agent: each task runs as one dsh session until the agent is quiet (its turn and the turns its background work starts).',
    supportedInterfaces: [{ url: `${options.publicUrl}${JSON_RPC_PATH}`, protocolBinding: 'JSONRPC', tenant: '', protocolVersion: '1.0' }],
    provider: undefined,
    version: options.version,
    capabilities: { streaming: true, pushNotifications: false, extensions: [] },
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
    ],
    signatures: [],
  }
  if (options.bearer) {
    card.securitySchemes = { bearer: { scheme: { $case: 'httpAuthSecurityScheme', value: { description: 'The token the worker was started with', scheme: 'Bearer', bearerFormat: '' } } } }
  }
  return card
}
