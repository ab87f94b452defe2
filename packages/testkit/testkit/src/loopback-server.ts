import { errorMessage } from '@dsh/base'
import { createServer, type IncomingMessage, type ServerResponse } from 'node:http'
import type { AddressInfo, Socket } from 'node:net'

/**
 * Handles one request whose body has been read in full. `stop` aborts when the client's
 * connection closes or the server is closing, so a handler that waits (delays, held-open
 * streams) can give up instead of keeping the test process alive.
 */
export type LoopbackHandler = (req: IncomingMessage, res: ServerResponse, body: string, stop: AbortSignal) => Promise<void>

export interface LoopbackServer {
  port: number
  /** `http://127.0.0.1:PORT`, no trailing slash. */
  origin: string
  /** Stops listening and destroys every open socket, so no held-open stream can hang a test. */
  close(): Promise<void>
}

/**
 * The plumbing shared by the fake model servers: a `node:http` server on 127.0.0.1 with an
 * ephemeral port, whose `close()` does not wait for clients to hang up.
 */
export async function startLoopbackServer(handle: LoopbackHandler): Promise<LoopbackServer> {
  const closing = new AbortController()
  const sockets = new Set<Socket>()

  const server = createServer((req, res) => {
    const hungUp = new AbortController()
    res.on('close', () => hungUp.abort())
    const stop = AbortSignal.any([closing.signal, hungUp.signal])
    readBody(req)
      .then((body) => handle(req, res, body, stop))
      .catch((error: unknown) => failRequest(res, error))
  })
  server.on('connection', (socket) => {
    sockets.add(socket)
    socket.on('close', () => sockets.delete(socket))
  })

  await new Promise<void>((resolve, reject) => {
    server.once('error', reject)
    server.listen(0, '127.0.0.1', () => {
      server.off('error', reject)
      resolve()
    })
  })
  const { port } = server.address() as AddressInfo

  let closed: Promise<void> | undefined
  const close = () => {
    closed ??= new Promise<void>((resolve) => {
      closing.abort()
      server.close(() => resolve())
      for (const socket of sockets) socket.destroy()
    })
    return closed
  }

  return { port, origin: `http://127.0.0.1:${port}`, close }
}

function readBody(req: IncomingMessage): Promise<string> {
  return new Promise((resolve, reject) => {
    let body = ''
    req.setEncoding('utf8')
    req.on('data', (piece: string) => (body += piece))
    req.on('end', () => resolve(body))
    req.on('error', reject)
  })
}

/** A handler bug must show up in the test as a 500 with its message, never as a hang. */
function failRequest(res: ServerResponse, error: unknown): void {
  if (res.headersSent || res.destroyed) {
    // Mid-response there is no way left to report it; cutting the stream makes the client fail.
    res.destroy()
    return
  }
  const message = errorMessage(error)
  res.writeHead(500, { 'content-type': 'text/plain; charset=utf-8' })
  res.end(`fake server handler failed: ${message}`)
}

/** Waits `ms`, or less if `signal` aborts first; resolves `false` when it was cut short. */
export function pause(ms: number, signal: AbortSignal): Promise<boolean> {
  if (signal.aborted) return Promise.resolve(false)
  return new Promise((resolve) => {
    const timer = setTimeout(() => {
      signal.removeEventListener('abort', onAbort)
      resolve(true)
    }, ms)
    const onAbort = () => {
      clearTimeout(timer)
      resolve(false)
    }
    signal.addEventListener('abort', onAbort, { once: true })
  })
}

/** Resolves once `signal` aborts (the client hung up or the server is closing). */
export function untilStopped(signal: AbortSignal): Promise<void> {
  if (signal.aborted) return Promise.resolve()
  return new Promise((resolve) => signal.addEventListener('abort', () => resolve(), { once: true }))
}

/** Writes and waits until the bytes are handed to the socket; `false` if the connection is gone. */
export function writeFlushed(res: ServerResponse, data: string): Promise<boolean> {
  if (res.destroyed) return Promise.resolve(false)
  return new Promise((resolve) => res.write(data, (error) => resolve(!error)))
}
