export { McpServe, serveMcpOverStdio, DEFAULT_MAX_CALLS, DEFAULT_MAX_QUEUED, type McpServeOptions, type StdioServing } from './server.js'
export type { HttpServeOptions, HttpServing } from './http.js'
export { carriesBearer, interfaceHostNames, isLoopback, MAX_SESSIONS, MCP_PATH } from './http-access.js'
import type { serveMcpOverHttp as ServeOverHttp } from './http.js'

/**
 * Serve over Streamable HTTP (`dsh mcp serve --http`). The transport and the SDK's HTTP
 * server are loaded here, when asked for: a stdio start does not read them (bench/mcp.js:
 * its start-up is what an MCP client waits for before its first call).
 */
export async function serveMcpOverHttp(...args: Parameters<typeof ServeOverHttp>): ReturnType<typeof ServeOverHttp> {
  return (await import('./http.js')).serveMcpOverHttp(...args)
}
export { MCP_ORIGIN, type McpCallEvent, type McpCallAbout } from './calls.js'
export { DELEGATE_TOOL, MAX_PROMPT_CHARS, promptOf } from './tools.js'
export { answerOf, elicitation, CLIENT_CANNOT_ASK, MCP_CLIENT } from './approvals.js'
export { McpServerError, type McpServerErrorCode } from './errors.js'
export { PERMISSION_POLICIES, type PermissionPolicy } from '@dsh/approvals'
