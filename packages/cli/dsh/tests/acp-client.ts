import { spawn, type ChildProcess } from 'node:child_process'
import type { ClientConnection } from '@agentclientprotocol/sdk'
import { connectAcpClient } from '@dsh/testkit/acp'
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
  const { connection, stdout, stderr, exited } = connectAcpClient(child, { name: 'cli-test' })
  return { child, connection, stdout, stderr, exited }
}
