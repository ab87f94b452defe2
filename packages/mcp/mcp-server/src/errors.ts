import { DshError } from '@dsh/base'

export type McpServerErrorCode = 'INVALID_OPTION' | 'INSECURE_LISTEN' | 'LISTEN_FAILED' | 'CLOSED'

/** A server that cannot be set up as asked (its options, its address), or is closing. */
export class McpServerError extends DshError<McpServerErrorCode> {}
