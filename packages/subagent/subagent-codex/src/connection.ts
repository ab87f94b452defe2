/**
 * JSON-RPC 2.0 over the app-server's stdio, one JSON message a line. This class is the
 * only code that reads or writes frames: the run speaks in typed calls, and every line
 * the server writes is checked here before anyone looks inside it.
 */
import { StringDecoder } from 'node:string_decoder'
import { DshError, isRecord } from '@dsh/base'
import type { Readable, Writable } from 'node:stream'
import type {
  GetAccountParams,
  GetAccountResponse,
  InitializeParams,
  InitializeResponse,
  RequestId,
  ThreadStartParams,
  ThreadStartResponse,
  TurnInterruptParams,
  TurnInterruptResponse,
  TurnStartParams,
  TurnStartResponse,
  ThreadResumeParams,
  ThreadResumeResponse,
} from './protocol/index.js'

/** The client → server requests this provider makes, with their generated param and result types. */
interface ClientRequests {
  initialize: { params: InitializeParams; result: InitializeResponse }
  'account/read': { params: GetAccountParams; result: GetAccountResponse }
  'thread/start': { params: ThreadStartParams; result: ThreadStartResponse }
  'thread/resume': { params: ThreadResumeParams; result: ThreadResumeResponse }
  'turn/start': { params: TurnStartParams; result: TurnStartResponse }
  'turn/interrupt': { params: TurnInterruptParams; result: TurnInterruptResponse }
}

/** The client → server notifications this provider sends. */
interface ClientNotifications {
  initialized: undefined
}

/** A request the server sent us; it must be answered with `respond` or `respondError`. */
export interface IncomingRequest {
  id: RequestId
  method: string
  params: unknown
}

interface ConnectionHandlers {
  notification(method: string, params: unknown): void
  request(request: IncomingRequest): void
  /** The server broke the framing or the protocol. The connection is closed right after. */
  protocolError(error: ProtocolError): void
}

type CodexConnectionErrorCode = 'RPC_ERROR' | 'PROTOCOL_ERROR' | 'CONNECTION_CLOSED'

/** Every failure of the app-server connection; the subclasses fix the code. */
class CodexConnectionError extends DshError<CodexConnectionErrorCode> {}

/** The server answered one of our requests with a JSON-RPC error (`rpcCode` is the JSON-RPC error code). */
export class RpcError extends CodexConnectionError {
  constructor(readonly method: string, readonly rpcCode: number, message: string, readonly data?: unknown) {
    super('RPC_ERROR', `${message} (JSON-RPC error ${rpcCode})`)
  }
}

/** The server wrote something that is not a JSON-RPC message we can accept. */
export class ProtocolError extends CodexConnectionError {
  constructor(message: string) {
    super('PROTOCOL_ERROR', message)
  }
}

/** The connection closed before the server answered. */
export class ConnectionClosedError extends CodexConnectionError {
  constructor(message: string) {
    super('CONNECTION_CLOSED', message)
  }
}

/** JSON-RPC error codes we answer with. */
export const METHOD_NOT_FOUND = -32601
export const REQUEST_REFUSED = -32000

/** A line longer than this is not a frame we will buffer (a run's largest, `turn/completed`, is far smaller). */
const MAX_LINE_CHARS = 32 * 1024 * 1024

interface Pending {
  method: string
  resolve(result: unknown): void
  reject(error: Error): void
}

export class AppServerConnection {
  private nextId = 1
  private readonly pending = new Map<number, Pending>()
  private readonly decoder = new StringDecoder('utf8')
  private buffered = ''
  private closedBy: Error | undefined

  constructor(
    input: Readable,
    private readonly output: Writable,
    private readonly handlers: ConnectionHandlers,
  ) {
    input.on('data', (chunk: Buffer) => this.receive(this.decoder.write(chunk)))
    input.on('end', () => this.close(new ConnectionClosedError('the codex app-server closed its stdout')))
    input.on('error', (error) => this.close(new ConnectionClosedError(`reading the codex app-server's stdout failed: ${error.message}`)))
  }

  /** Send a request; resolves with the raw result (validated by the caller, who knows its shape). */
  request<M extends keyof ClientRequests>(method: M, params: ClientRequests[M]['params']): Promise<unknown> {
    if (this.closedBy) return Promise.reject(this.closedBy)
    const id = this.nextId++
    return new Promise<unknown>((resolve, reject) => {
      this.pending.set(id, { method, resolve, reject })
      this.write({ jsonrpc: '2.0', id, method, params })
    })
  }

  notify<M extends keyof ClientNotifications>(method: M, params?: ClientNotifications[M]): void {
    this.write(params === undefined ? { jsonrpc: '2.0', method } : { jsonrpc: '2.0', method, params })
  }

  respond(id: RequestId, result: unknown): void {
    this.write({ jsonrpc: '2.0', id, result })
  }

  respondError(id: RequestId, code: number, message: string): void {
    this.write({ jsonrpc: '2.0', id, error: { code, message } })
  }

  /** Reject every pending request with `reason`; later sends are dropped. Idempotent. */
  close(reason: Error): void {
    if (this.closedBy) return
    this.closedBy = reason
    for (const { reject } of this.pending.values()) reject(reason)
    this.pending.clear()
  }

  private write(message: Record<string, unknown>): void {
    // After close (the server is gone or misbehaved) there is nobody to talk to; the run
    // has already been told why, so a late answer to a server request is simply dropped.
    if (this.closedBy || this.output.destroyed || this.output.writableEnded) return
    this.output.write(`${JSON.stringify(message)}\n`)
  }

  private receive(text: string): void {
    this.buffered += text
    let newline = this.buffered.indexOf('\n')
    while (newline >= 0 && !this.closedBy) {
      const line = this.buffered.slice(0, newline).trim()
      this.buffered = this.buffered.slice(newline + 1)
      if (line) this.dispatch(line)
      newline = this.buffered.indexOf('\n')
    }
    if (this.buffered.length > MAX_LINE_CHARS) this.fail(`a line of more than ${MAX_LINE_CHARS} characters without a newline`)
  }

  private dispatch(line: string): void {
    let message: unknown
    try {
      message = JSON.parse(line)
    } catch {
      return this.fail(`a line that is not JSON: ${quote(line)}`)
    }
    if (!isRecord(message)) return this.fail(`a JSON line that is not an object: ${quote(line)}`)
    if (message.jsonrpc !== undefined && message.jsonrpc !== '2.0') return this.fail(`a message with jsonrpc ${JSON.stringify(message.jsonrpc)}: ${quote(line)}`)

    const { id, method } = message
    const hasId = typeof id === 'string' || typeof id === 'number'
    if (typeof method === 'string') {
      if (hasId) return this.handlers.request({ id, method, params: message.params })
      if (id !== undefined) return this.fail(`a request with an invalid id: ${quote(line)}`)
      return this.handlers.notification(method, message.params)
    }
    if (!hasId) return this.fail(`a message that is neither a request, a notification nor a response: ${quote(line)}`)
    const pending = typeof id === 'number' ? this.pending.get(id) : undefined
    if (!pending) return this.fail(`a response to a request never sent (id ${JSON.stringify(id)}): ${quote(line)}`)
    // Checked while the request is still pending, so a failure here rejects it too.
    const error = message.error
    if ('error' in message && (!isRecord(error) || typeof error.code !== 'number' || typeof error.message !== 'string')) {
      return this.fail(`an error response without a code and a message: ${quote(line)}`)
    }
    if (!('error' in message) && !('result' in message)) return this.fail(`a response with neither result nor error: ${quote(line)}`)
    this.pending.delete(id as number)
    if (isRecord(error)) pending.reject(new RpcError(pending.method, error.code as number, error.message as string, error.data))
    else pending.resolve(message.result)
  }

  private fail(what: string): void {
    const error = new ProtocolError(`the codex app-server wrote ${what}`)
    this.close(error)
    this.handlers.protocolError(error)
  }
}

function quote(line: string): string {
  return JSON.stringify(line.length > 200 ? `${line.slice(0, 200)}…` : line)
}

