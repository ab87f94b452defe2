import { spawn, type ChildProcess } from 'node:child_process'
import { fileURLToPath } from 'node:url'
import { afterEach } from 'vitest'

/** The fixture runs against the built packages (`npx tsc -b` first), like the CLI tests. */
const FIXTURE = fileURLToPath(new URL('./fixtures/session-process.mjs', import.meta.url))

const running: ChildProcess[] = []
afterEach(() => {
  for (const child of running.splice(0)) if (child.exitCode === null && child.signalCode === null) child.kill('SIGKILL')
})

/** A real process running one session (see fixtures/session-process.mjs). */
export interface SessionProcess {
  child: ChildProcess
  /** The next stdout line that starts with `prefix` (lines already seen count). */
  line(prefix: string): Promise<string>
  /** Send a command and wait for its `did …` answer. */
  command(text: string): Promise<void>
  /** Resolves with the exit code (or the signal) once the process has exited. */
  exited: Promise<number | NodeJS.Signals | null>
}

export function startSessionProcess(dir: string, ...args: string[]): SessionProcess {
  const child = spawn(process.execPath, [FIXTURE, dir, ...args], { stdio: ['pipe', 'pipe', 'pipe'] })
  running.push(child)
  const lines: string[] = []
  const waiters: { prefix: string; resolve: (line: string) => void }[] = []
  let stderr = ''
  let buffered = ''
  child.stderr!.setEncoding('utf8').on('data', (chunk: string) => (stderr += chunk))
  child.stdout!.setEncoding('utf8').on('data', (chunk: string) => {
    buffered += chunk
    for (let end = buffered.indexOf('\n'); end >= 0; end = buffered.indexOf('\n')) {
      const line = buffered.slice(0, end)
      buffered = buffered.slice(end + 1)
      lines.push(line)
      for (const waiter of waiters.splice(0)) {
        if (line.startsWith(waiter.prefix)) waiter.resolve(line)
        else waiters.push(waiter)
      }
    }
  })
  const exited = new Promise<number | NodeJS.Signals | null>((resolve) => child.once('exit', (code, signal) => resolve(code ?? signal)))
  const line = (prefix: string) =>
    new Promise<string>((resolve, reject) => {
      const seen = lines.find((candidate) => candidate.startsWith(prefix))
      if (seen !== undefined) return resolve(seen)
      waiters.push({ prefix, resolve })
      void exited.then((how) => reject(new Error(`the session process exited (${how}) before printing "${prefix}…"; stdout: ${lines.join(' | ')}; stderr: ${stderr}`)))
    })
  return {
    child,
    line,
    exited,
    async command(text: string) {
      child.stdin!.write(text + '\n')
      await line(`did ${text}`)
    },
  }
}
