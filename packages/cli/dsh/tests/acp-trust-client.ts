/**
 * `dsh acp` as a real process, driven by the official SDK client with a chosen answer to
 * `session/request_permission`; and the raw pipe beside it for frames no SDK would send.
 */
import { spawn, type ChildProcess } from 'node:child_process'
import { readdirSync } from 'node:fs'
import { PassThrough, Readable, Writable } from 'node:stream'
import { client, methods, ndJsonStream, type ClientConnection, type RequestPermissionRequest, type RequestPermissionResponse } from '@agentclientprotocol/sdk'
import { dshBin, repoRoot, tempDir } from './cli.js'

export type PermissionAnswer = (request: RequestPermissionRequest) => RequestPermissionResponse | Promise<RequestPermissionResponse>

/** Picks the first option of `kind`, as an editor's "always reject" setting would. */
export function pick(kind: 'allow_once' | 'allow_always' | 'reject_once'): PermissionAnswer {
  return (request) => {
    const option = request.options.find((candidate) => candidate.kind === kind)
    return option ? { outcome: { outcome: 'selected', optionId: option.optionId } } : { outcome: { outcome: 'cancelled' } }
  }
}

export interface TrustServed {
  child: ChildProcess
  connection: ClientConnection
  /** Every permission request the client was asked, in order. */
  asked: RequestPermissionRequest[]
  stdout(): string
  stderr(): string
  exited: Promise<{ code: number | null; signal: NodeJS.Signals | null }>
}

export const trustRunning: ChildProcess[] = []

export function killTrustRunning(): void {
  for (const child of trustRunning.splice(0)) if (child.exitCode === null && child.signalCode === null) child.kill('SIGKILL')
}

export function spawnDshAcp(args: string[]): ChildProcess {
  const child = spawn(process.execPath, [dshBin, 'acp', ...args], {
    cwd: repoRoot,
    env: { ...process.env, DSH_HOME: tempDir('dsh-home-'), DEEPSEEK_API_KEY: '', OPENAI_API_KEY: '' },
    stdio: ['pipe', 'pipe', 'pipe'],
  })
  trustRunning.push(child)
  return child
}

export function serveTrusted(args: string[], answer: PermissionAnswer = pick('reject_once')): TrustServed {
  const child = spawnDshAcp(args)
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
  const connection = client({ name: 'acp-trust-test' })
    .onRequest(methods.client.session.requestPermission, ({ params }) => {
      asked.push(params)
      return answer(params)
    })
    .connect(ndJsonStream(Writable.toWeb(child.stdin!) as WritableStream<Uint8Array>, Readable.toWeb(copy) as ReadableStream<Uint8Array>))
  return { child, connection, asked, stdout: () => stdout, stderr: () => stderr, exited }
}

/** The descriptors a process holds open right now (Linux). */
export function openDescriptors(pid: number): number {
  return readdirSync(`/proc/${pid}/fd`).length
}
