/**
 * A bestOf check: one shell command run in an attempt's workspace, through `@dsh/process`
 * (its own process group, an allow-listed environment, reaped), bounded by a timeout after
 * which the whole group is stopped. Exit 0 passes.
 */
import { childEnvironment, describeExit, ProcessTree, TailBuffer } from '@dsh/process'

export interface CheckOutcome {
  passed: boolean
  /** `exited with code 1`, `was killed by SIGKILL`, `timed out after N ms`, `could not start: …`. */
  how: string
  timedOut: boolean
  /** The last characters of what it printed (stdout and stderr). */
  output: string
}

const OUTPUT_CHARS = 2000

export async function runCheck(command: string, cwd: string, timeoutMs: number, signal: AbortSignal): Promise<CheckOutcome> {
  const tree = new ProcessTree({ command: '/bin/sh', args: ['-c', command], cwd, env: childEnvironment(process.env) })
  const output = new TailBuffer(OUTPUT_CHARS)
  tree.child.stdout?.on('data', (chunk: Buffer) => output.push(chunk.toString('utf8')))
  tree.child.stderr?.on('data', (chunk: Buffer) => output.push(chunk.toString('utf8')))
  tree.child.stdin?.end()
  try {
    await tree.spawned
  } catch (error) {
    return { passed: false, how: `could not start: ${(error as Error).message}`, timedOut: false, output: '' }
  }
  let timer: NodeJS.Timeout | undefined
  let cancelled: (() => void) | undefined
  const ended = await Promise.race([
    tree.exited.then((exit) => ({ kind: 'exit' as const, exit })),
    new Promise<{ kind: 'timeout' }>((resolve) => (timer = setTimeout(() => resolve({ kind: 'timeout' }), timeoutMs))),
    new Promise<{ kind: 'cancelled' }>((resolve) => {
      cancelled = () => resolve({ kind: 'cancelled' })
      if (signal.aborted) cancelled()
      else signal.addEventListener('abort', cancelled, { once: true })
    }),
  ])
  clearTimeout(timer)
  if (cancelled) signal.removeEventListener('abort', cancelled)
  // Whatever it started goes with it, on every path.
  await tree.reap({ stdinGraceMs: 0, termGraceMs: 1000 }).catch(() => {})
  const printed = output.toString().trim()
  if (ended.kind === 'timeout') return { passed: false, how: `timed out after ${timeoutMs} ms (its processes were stopped)`, timedOut: true, output: printed }
  if (ended.kind === 'cancelled') return { passed: false, how: 'was cancelled with the workflow', timedOut: false, output: printed }
  return { passed: ended.exit.code === 0, how: describeExit(ended.exit), timedOut: false, output: printed }
}
