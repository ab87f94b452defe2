/**
 * `dsh mcp serve --http` as a real process for the CLI's tests: resolved once it printed
 * its URL; `stop()` sends SIGTERM and waits for the exit (SIGKILL if a test left it running).
 */
import { spawn, type ChildProcess } from 'node:child_process'
import { dshBin } from './cli.js'
import { until } from './processes.js'

export interface ServedMcp {
  child: ChildProcess
  url: string
  stderr(): string
  exited: Promise<number | null>
  /** SIGTERM, then its exit code. */
  stop(): Promise<number | null>
}

export async function serveMcp(args: string[], env: Record<string, string>, cwd: string): Promise<ServedMcp> {
  const child = spawn(process.execPath, [dshBin, 'mcp', 'serve', ...args], { cwd, env: { ...process.env, ...env }, stdio: ['ignore', 'pipe', 'pipe'] })
  let stdout = ''
  let stderr = ''
  child.stdout!.on('data', (chunk: Buffer) => (stdout += chunk))
  child.stderr!.on('data', (chunk: Buffer) => (stderr += chunk))
  const exited = new Promise<number | null>((resolve) => child.on('close', (code) => resolve(code)))
  const stop = async () => {
    if (child.exitCode === null && child.signalCode === null) child.kill('SIGTERM')
    return exited
  }
  try {
    await until(
      () => stdout.includes('\n'),
      () => (child.exitCode !== null ? `dsh mcp serve exited ${child.exitCode}: ${stderr}` : undefined),
    )
  } catch (error) {
    child.kill('SIGKILL')
    throw error
  }
  return { child, url: stdout.trim(), stderr: () => stderr, exited, stop }
}
