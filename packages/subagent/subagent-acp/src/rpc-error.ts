import { RequestError } from '@agentclientprotocol/sdk'
import { errorMessage } from '@dsh/base'

/** A JSON-RPC error with its details (the SDK puts a handler's message in `data.details`). */
export function describeRpcError(error: unknown): string {
  if (error instanceof RequestError) {
    const data = error.data as { details?: unknown } | undefined
    const details = typeof data?.details === 'string' ? data.details : undefined
    return details && !error.message.includes(details) ? `${error.message} (${details})` : error.message
  }
  return errorMessage(error)
}
