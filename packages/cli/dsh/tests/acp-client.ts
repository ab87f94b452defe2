import { spawn, type ChildProcess } from 'node:child_process'
import { PassThrough, Readable, Writable } from 'node:stream'
import { client, ndJsonStream, type ClientConnection } from '@agentclientprotocol/sdk'
import { dshBin, repoRoot, tempDir } from './cli.js'

export interface Served {
  child: ChildProcess
  connection: ClientConnection
  /** Everything the process wrote to stdout, verbatim. */
  stdout(): string
  stderr(): string
  exited: Promise<{ code: number | null; signal: NodeJS.Signals | null }>
}

/** Every `dsh acp` started by `serveDsh`: a test file's afterEach kills those still running. */
export const running: ChildProcess[] = []

export function killRunning(): void {
  for (const child of running.splice(0)) if (child.exitCode === null && child.signalCode === null) child.kill('SIGKILL')
}

/** `dsh acp` as a real process, with an SDK client on its stdio and a copy of its raw stdout. */
export function serveDsh(args: string[], env: NodeJS.ProcessEnv = {}): Served {
  const child = spawn(process.execPath, [dshBin, 'acp', ...args], {
    cwd: repoRoot,
    env: { ...process.env, DSH_HOME: tempDir('dsh-home-'), DEEPSEEK_API_KEY: '', OPENAI_API_KEY: '', ...env },
    stdio: ['pipe', 'pipe', 'pipe'],
  })
  running.push(child)
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
  const connection = client({ name: 'cli-test' }).connect(
    ndJsonStream(Writable.toWeb(child.stdin!) as WritableStream<Uint8Array>, Readable.toWeb(copy) as ReadableStream<Uint8Array>),
  )
  return { child, connection, stdout: () => stdout, stderr: () => stderr, exited }
}
