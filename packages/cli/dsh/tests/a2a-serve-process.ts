/**
 * `dsh a2a serve` as a real process on a free loopback port, for the CLI's A2A tests:
 * started with a private DSH_HOME, resolved once it printed its URL, killed after each
 * test that did not stop it.
 */
import { spawn, type ChildProcess } from 'node:child_process'
import { afterEach } from 'vitest'
import { dshBin, repoRoot, tempDir } from './cli.js'
import { until } from './processes.js'

export interface Served {
  child: ChildProcess
  url: string
  stderr(): string
  exited: Promise<number | null>
}

const running: Served[] = []
afterEach(async () => {
  for (const served of running.splice(0)) {
    if (served.child.exitCode === null && served.child.signalCode === null) served.child.kill('SIGKILL')
    await served.exited
  }
})

/** Start `dsh a2a serve --port 0 ...args`; resolves with its URL once it printed it. */
export async function serve(args: string[], env: NodeJS.ProcessEnv = {}): Promise<Served> {
  const child = spawn(process.execPath, [dshBin, 'a2a', 'serve', '--port', '0', ...args], { cwd: repoRoot, env: { ...process.env, DSH_HOME: tempDir('dsh-home-'), ...env }, stdio: ['ignore', 'pipe', 'pipe'] })
  let stdout = ''
  let stderr = ''
  child.stdout!.on('data', (chunk: Buffer) => (stdout += chunk))
  child.stderr!.on('data', (chunk: Buffer) => (stderr += chunk))
  const exited = new Promise<number | null>((resolve) => child.on('close', (code) => resolve(code)))
  const served: Served = { child, url: '', stderr: () => stderr, exited }
  running.push(served)
  await until(
    () => stdout.includes('\n'),
    () => (child.exitCode !== null ? `dsh a2a serve exited ${child.exitCode}: ${stderr}` : undefined),
  )
  return { ...served, url: stdout.trim() }
}
