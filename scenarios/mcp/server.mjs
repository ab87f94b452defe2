// The scenario's MCP server (stdio, on the SDK's own server classes): a glossary whose
// lookup is read-only and whose add would change it, so dsh asks the approval broker first.
import { Server } from '@modelcontextprotocol/sdk/server/index.js'
import { StdioServerTransport } from '@modelcontextprotocol/sdk/server/stdio.js'
import { CallToolRequestSchema, ListToolsRequestSchema } from '@modelcontextprotocol/sdk/types.js'

const glossary = { mcp: 'the Model Context Protocol: how an agent reaches tools served by another program' }
const term = { type: 'object', properties: { term: { type: 'string' } }, required: ['term'] }
const server = new Server({ name: 'glossary', version: '1.0.0' }, { capabilities: { tools: {} } })
server.setRequestHandler(ListToolsRequestSchema, async () => ({
  tools: [
    { name: 'lookup', description: 'Look a term up in the glossary.', inputSchema: term, annotations: { readOnlyHint: true } },
    { name: 'add', description: 'Add a term to the glossary.', inputSchema: { ...term, properties: { ...term.properties, meaning: { type: 'string' } }, required: ['term', 'meaning'] } },
  ],
}))
server.setRequestHandler(CallToolRequestSchema, async ({ params }) => {
  const word = String(params.arguments?.term)
  if (params.name === 'lookup') return { content: [{ type: 'text', text: glossary[word] ?? `no entry for ${word}` }] }
  glossary[word] = String(params.arguments?.meaning)
  return { content: [{ type: 'text', text: `added ${word}` }] }
})
await server.connect(new StdioServerTransport())
