import { DshError } from '@dsh/base'

export type McpErrorCode = 'INVALID_CONFIG' | 'PROJECT_FILE' | 'START' | 'CLOSED' | 'TIMED_OUT' | 'PROTOCOL'

/** A server or call the MCP client refuses or lost: its message names the server and says why, in one line. */
export class McpError extends DshError<McpErrorCode> {}
