import { PassThrough } from 'node:stream'
import { describe, expect, it } from 'vitest'
import { AppServerConnection, ConnectionClosedError, RpcError, type IncomingRequest, type ProtocolError } from '../src/connection.js'

function connect() {
  const fromServer = new PassThrough()
  const toServer = new PassThrough()
  const written: unknown[] = []
  toServer.on('data', (chunk: Buffer) => chunk.toString().split('\n').filter(Boolean).forEach((line) => written.push(JSON.parse(line))))
  const seen = { notifications: [] as [string, unknown][], requests: [] as IncomingRequest[], errors: [] as ProtocolError[] }
  const connection = new AppServerConnection(fromServer, toServer, {
    notification: (method, params) => void seen.notifications.push([method, params]),
    request: (request) => void seen.requests.push(request),
    protocolError: (error) => void seen.errors.push(error),
  })
  const server = (text: string) => new Promise<void>((resolve) => fromServer.write(text, () => setImmediate(resolve)))
  return { connection, server, written, seen, fromServer }
}

const interrupt = { threadId: 't', turnId: 'u' }

describe('app-server connection (NDJSON JSON-RPC)', () => {
  it('writes one JSON-RPC message a line and resolves a request with its result', async () => {
    const { connection, server, written } = connect()
    const answered = connection.request('turn/interrupt', interrupt)
    connection.notify('initialized')
    expect(written).toEqual([{ jsonrpc: '2.0', id: 1, method: 'turn/interrupt', params: interrupt }, { jsonrpc: '2.0', method: 'initialized' }])
    await server('{"id":1,"result":{}}\n')
    expect(await answered).toEqual({})
  })

  it('reassembles frames split across chunks and several frames in one chunk', async () => {
    const { server, seen } = connect()
    await server('{"method":"a","par')
    await server('ams":{"x":1}}\n{"method":"b"}\n{"id":7,"method":"c","params":null}\n')
    expect(seen.notifications).toEqual([['a', { x: 1 }], ['b', undefined]])
    expect(seen.requests).toEqual([{ id: 7, method: 'c', params: null }])
  })

  it('rejects a request answered with a JSON-RPC error as an RpcError', async () => {
    const { connection, server } = connect()
    const outcome = connection.request('turn/interrupt', interrupt).catch((error: unknown) => error)
    await server('{"id":1,"error":{"code":-32600,"message":"no such turn"}}\n')
    const error = await outcome
    expect(error).toBeInstanceOf(RpcError)
    expect(error).toMatchObject({ method: 'turn/interrupt', rpcCode: -32600, code: 'RPC_ERROR', name: 'RpcError', message: 'no such turn (JSON-RPC error -32600)' })
  })

  it.each([
    ['a line that is not JSON', 'hello\n', 'a line that is not JSON'],
    ['a JSON value that is not an object', '[1,2]\n', 'not an object'],
    ['a response to an unknown id', '{"id":99,"result":{}}\n', 'a request never sent (id 99)'],
    ['a response with neither result nor error', '{"id":1}\n', 'neither result nor error'],
    ['a malformed error response', '{"id":1,"error":"bad"}\n', 'without a code and a message'],
    ['a message with a foreign jsonrpc version', '{"jsonrpc":"1.0","method":"x"}\n', 'jsonrpc "1.0"'],
  ])('treats %s as a protocol error and closes', async (_name, line, expected) => {
    const { connection, server, seen } = connect()
    const outcome = connection.request('turn/interrupt', interrupt).catch((error: unknown) => error)
    await server(line)
    expect(seen.errors).toHaveLength(1)
    expect(seen.errors[0].message).toContain(expected)
    expect(await outcome).toBe(seen.errors[0])
    // Nothing after a protocol error is dispatched.
    await server('{"method":"late"}\n')
    expect(seen.notifications).toEqual([])
  })

  it('rejects pending requests when the server closes its stdout, and refuses new ones', async () => {
    const { connection, fromServer } = connect()
    const outcome = connection.request('turn/interrupt', interrupt).catch((error: unknown) => error)
    fromServer.end()
    expect(await outcome).toBeInstanceOf(ConnectionClosedError)
    await expect(connection.request('turn/interrupt', interrupt)).rejects.toBeInstanceOf(ConnectionClosedError)
  })
})
