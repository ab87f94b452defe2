import type { RequestError } from '@agentclientprotocol/sdk'
import { errorMessage } from '@dsh/base'
import { loadedAcpSdk } from './sdk.js'

/** Whether `error` is a JSON-RPC error answer; before the SDK is loaded, nothing can be one. */
export function isRpcError(error: unknown): error is RequestError {
  const sdk = loadedAcpSdk()
  return sdk !== undefined && error instanceof sdk.RequestError
}

/** A JSON-RPC error with its details (the SDK puts a handler's message in `data.details`). */
export function describeRpcError(error: unknown): string {
  if (isRpcError(error)) {
    const data = error.data as { details?: unknown } | undefined
    const details = typeof data?.details === 'string' ? data.details : undefined
    return details && !error.message.includes(details) ? `${error.message} (${details})` : error.message
  }
  return errorMessage(error)
}
