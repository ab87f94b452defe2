/**
 * `dsh acp`: serve a dsh agent over the Agent Client Protocol on stdio, for editors and
 * for the `acp` subagent provider. Stdout carries protocol frames and nothing else, so
 * every log line goes to stderr. The process ends when the client closes stdin (or on
 * SIGTERM/SIGINT): every ACP session's agent is disposed (its turn cancelled, its tasks
 * killed, its session flushed), every process group it started is taken down, and the
 * exit code is 0. A second signal exits at once, killing those groups. A `session/new`
 * whose lineage (`_meta.dsh.delegationDepth`) is deeper than `--max-depth` (default 3)
 * is refused with a JSON-RPC error, so delegation through `dsh acp` processes is bounded.
 * `--permission ask|allow|reject` (default ask) says who decides whether a side-effecting
 * tool may run (`allow` only for an editor's sessions: a session a parent delegated asks up
 * the tree); `--max-frame-bytes N` bounds one input line. Whatever ends the process is
 * said in one line on stderr.
 */
import { parseVerbArgs } from './args.js'
import { serveAcpOverStdio, type PermissionPolicy } from '@dsh/acp-server'
import { parsePermissionPolicy } from '@dsh/approvals'
import { reapTrackedGroups } from '@dsh/process'
import { UsageError } from './errors.js'
import { exitCodeOfSignal } from './exit.js'
import { chooseModel, replayProblems } from './run.js'
import { onInterrupt } from './interrupt.js'
import { startRuntime } from './runtime.js'
import { cliVersion } from './version.js'

export async function acpVerb(args: string[]): Promise<number> {
  const { values } = parseVerbArgs('acp', {
    args,
    allowPositionals: false,
    options: {
      config: { type: 'string' },
      model: { type: 'string' },
      'session-dir': { type: 'string' },
      verbose: { type: 'boolean', default: false },
      'max-depth': { type: 'string' },
      record: { type: 'string' },
      permission: { type: 'string', default: 'ask' },
      'max-frame-bytes': { type: 'string' },
    },
  })
  const maxDepth = parseMaxDepth(values['max-depth'])
  const permission = parsePermission(values.permission)
  const maxFrameBytes = parseMaxFrameBytes(values['max-frame-bytes'])
  keepStdoutForFrames()
  const model = chooseModel(values.model)
  const runtime = await startRuntime({ config: values.config, model, sessionDir: values['session-dir'], verbose: values.verbose, checkReady: true, ...(values.record !== undefined && { record: values.record }) })
  if (!runtime.ctx.llm.config.model && !model) {
    await runtime.dispose()
    throw new UsageError('NO_MODEL', 'dsh acp: no model to run with: pass --model SPEC (e.g. --model deepseek:deepseek-chat, or --model scripted:FILE.yml for a keyless script; dsh demo shows one), set llm.model in --config, or set DEEPSEEK_API_KEY')
  }
  const server = serveAcpOverStdio(runtime.ctx, { maxDepth, permission, maxFrameBytes, agentVersion: cliVersion(), ...(process.env.DSH_RECORDING_DIR && { recordingDir: process.env.DSH_RECORDING_DIR }), report: (line) => process.stderr.write(`dsh acp: ${line}\n`) })
  let stoppedBy: NodeJS.Signals | undefined
  // The first SIGTERM/SIGINT closes the connection like EOF does; a second exits at once,
  // and the exit hook of @dsh/process kills every process group still running.
  const stopSignals = onInterrupt(
    (signal) => {
      stoppedBy = signal
      void server.close()
    },
    (signal) => process.exit(exitCodeOfSignal(signal)),
  )
  let replayed: string[] = []
  try {
    await server.done
  } finally {
    replayed = replayProblems(runtime)
    await runtime.dispose()
    // Disposing cancelled every turn and killed every task; a command that ignores
    // SIGTERM, or one started while we were closing, must not outlive us either.
    const survivors = await reapTrackedGroups()
    if (survivors.length > 0) process.stderr.write(`dsh acp: process groups ${survivors.join(', ')} outlived SIGKILL\n`)
    stopSignals()
    // After a signal stdin may still be open, and an open stdin keeps the process alive.
    process.stdin.destroy()
  }
  const reason = stoppedBy ? `stopped by ${stoppedBy}` : await server.ended
  process.stderr.write(`dsh acp: exiting: ${reason === 'end of input' ? 'the client closed stdin' : reason}\n`)
  // A replayed ACP server that diverged says so, and its parent sees a failed child.
  for (const problem of replayed) process.stderr.write(`dsh acp: ${problem}\n`)
  return replayed.length > 0 ? 1 : 0
}

/** `--permission ask|allow|reject`: who decides whether a side-effecting tool may run. */
function parsePermission(raw: string | undefined): PermissionPolicy {
  const read = parsePermissionPolicy(raw)
  if (!read.ok) throw new UsageError('USAGE', `dsh acp: --permission ${read.problem}`)
  return read.value
}

/** `--max-frame-bytes N`: the longest input line; longer ones are answered with an error and dropped. */
function parseMaxFrameBytes(raw: string | undefined): number | undefined {
  if (raw === undefined) return undefined
  if (!/^\d+$/.test(raw) || !Number.isSafeInteger(Number(raw)) || Number(raw) < 1) throw new UsageError('USAGE', `dsh acp: --max-frame-bytes must be a whole number of at least 1 (got "${raw}")`)
  return Number(raw)
}

/** `--max-depth N`: the deepest delegation a `session/new` may ask for (default that of @dsh/acp-server, 3). */
function parseMaxDepth(raw: string | undefined): number | undefined {
  if (raw === undefined) return undefined
  if (!/^\d+$/.test(raw) || !Number.isSafeInteger(Number(raw))) throw new UsageError('USAGE', `dsh acp: --max-depth must be a whole number of at least 0 (got "${raw}")`)
  return Number(raw)
}

/**
 * Anything that writes to stdout through `console` would corrupt the protocol stream:
 * send it to stderr instead. Frames are written to `process.stdout` directly.
 */
function keepStdoutForFrames(): void {
  const toStderr = (...parts: unknown[]) => console.error(...parts)
  console.log = toStderr
  console.info = toStderr
  console.debug = toStderr
}
