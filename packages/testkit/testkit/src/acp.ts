/**
 * The official ACP SDK's client on a child process's stdio, for tests that drive an ACP
 * agent (`dsh acp`) as an editor would: a copy of the raw stdout beside the connection,
 * the stderr, the exit, and every `session/request_permission` asked with the test's
 * answer. Its own entry (`@dsh/testkit/acp`).
 */
import type { ChildProcess } from 'node:child_process'
import { PassThrough, Readable, Writable } from 'node:stream'
import { client, methods, ndJsonStream, type ClientConnection, type RequestPermissionRequest, type RequestPermissionResponse } from '@agentclientprotocol/sdk'

export type PermissionAnswer = (request: RequestPermissionRequest) => RequestPermissionResponse | Promise<RequestPermissionResponse>

/** Picks the first option of `kind`, as an editor's "always reject" setting would (`cancelled` when there is none). */
export function pickPermission(kind: 'allow_once' | 'allow_always' | 'reject_once'): PermissionAnswer {
  return (request) => {
    const option = request.options.find((candidate) => candidate.kind === kind)
    return option ? { outcome: { outcome: 'selected', optionId: option.optionId } } : { outcome: { outcome: 'cancelled' } }
  }
}

export interface AcpPeer {
  connection: ClientConnection
  /** Every permission request the client was asked, in order. */
  asked: RequestPermissionRequest[]
  /** Everything the process wrote to stdout, verbatim. */
  stdout(): string
  stderr(): string
  exited: Promise<{ code: number | null; signal: NodeJS.Signals | null }>
}

/** Connect an SDK client named `name` to `child`'s stdio; without `answer` a permission request is left to the SDK's default. */
export function connectAcpClient(child: ChildProcess, options: { name: string; answer?: PermissionAnswer }): AcpPeer {
  let stdout = ''
  let stderr = ''
  const copy = new PassThrough()
  child.stdout!.on('data', (chunk: Buffer) => {
    stdout += chunk.toString('utf8')
    copy.write(chunk)
  })
  child.stdout!.on('end', () => copy.end())
  child.stderr!.on('data', (chunk: Buffer) => (stderr += chunk.toString('utf8')))
  const exited = new Promise<{ code: number | null; signal: NodeJS.Signals | null }>((resolve) => child.on('close', (code, signal) => resolve({ code, signal })))
  const asked: RequestPermissionRequest[] = []
  let app = client({ name: options.name })
  const { answer } = options
  if (answer) {
    app = app.onRequest(methods.client.session.requestPermission, ({ params }) => {
      asked.push(params)
      return answer(params)
    })
  }
  const connection = app.connect(ndJsonStream(Writable.toWeb(child.stdin!) as WritableStream<Uint8Array>, Readable.toWeb(copy) as ReadableStream<Uint8Array>))
  return { connection, asked, stdout: () => stdout, stderr: () => stderr, exited }
}
