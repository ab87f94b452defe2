/**
 * `dsh mcp serve`: dsh's helpers as MCP tools (`@dsh/mcp-server`), on stdio (the default:
 * stdout carries protocol frames and nothing else, every log line goes to stderr) or, with
 * `--http`, on Streamable HTTP at 127.0.0.1 (port 0 by default; its URL is printed on
 * stdout as the only line there) with the bearer token `--token-env NAME` names, as `dsh
 * a2a serve` has it. Each call is one delegation through the served pipeline; a side effect
 * no approval rule decides is asked of the client through elicitation (`--permission ask`,
 * the default) where the client can, else rejected, or decided alone (`allow`, `reject`).
 * It runs until the client closes stdin (stdio) or SIGTERM/SIGINT: every call is cancelled,
 * every session flushed, every process group it started taken down. A second signal exits
 * at once.
 *
 * `dsh mcp list`: the MCP servers the config's `@dsh/mcp` entry names (`mcp-list.ts`).
 */
import { parseVerbArgs, verbUsage, wholeNumberOption } from '../args.js'
import { isRecord } from '@dsh/base'
import { parsePermissionPolicy } from '@dsh/approvals'
import type { PluginEntry } from '../config-entries.js'
import { reapTrackedGroups } from '@dsh/process'
import { UsageError } from '../errors.js'
import { exitCodeOfSignal } from '../exit.js'
import { onInterrupt } from '../interrupt.js'
import { chooseModel } from '../run.js'
import { startRuntime } from '../runtime.js'
import { workEndLine, workStartLine } from './work-log.js'
import type { McpCallEvent, PermissionPolicy } from '@dsh/mcp-server'

const VERB = 'dsh mcp serve'

/** What `dsh mcp` alone prints (`dsh mcp --help` is answered by main, from the CLI's shared usage table). */
export const MCP_USAGE = verbUsage('mcp')

export async function mcpVerb(args: string[]): Promise<number> {
  const [verb, ...rest] = args
  if (verb === undefined || verb === '--help' || verb === '-h' || rest.includes('--help') || rest.includes('-h')) {
    process.stdout.write(`${MCP_USAGE}\n`)
    return verb === undefined ? 2 : 0
  }
  if (verb === 'serve') return serveVerb(rest)
  if (verb === 'list') return (await import('./mcp-list.js')).mcpListVerb(rest)
  throw new UsageError('USAGE', `dsh mcp: unknown verb ${JSON.stringify(verb)}; the verbs are serve and list (dsh mcp --help)`)
}

async function serveVerb(args: string[]): Promise<number> {
  const { values } = parseVerbArgs('mcp serve', {
    args,
    allowPositionals: false,
    options: {
      http: { type: 'boolean', default: false },
      host: { type: 'string' },
      port: { type: 'string' },
      'token-env': { type: 'string' },
      'max-calls': { type: 'string' },
      'max-depth': { type: 'string' },
      permission: { type: 'string', default: 'ask' },
      config: { type: 'string' },
      model: { type: 'string' },
      'session-dir': { type: 'string' },
      verbose: { type: 'boolean', default: false },
    },
  })
  if (!values.http && (values.host !== undefined || values.port !== undefined || values['token-env'] !== undefined)) {
    throw new UsageError('USAGE', `${VERB}: --host, --port and --token-env are for --http (without it the server speaks on stdio)`)
  }
  const port = wholeNumberOption(VERB, '--port', values.port, 0, 65_535) ?? 0
  const maxCalls = wholeNumberOption(VERB, '--max-calls', values['max-calls'], 1, 10_000)
  const maxDepth = wholeNumberOption(VERB, '--max-depth', values['max-depth'], 0)
  const token = readToken(values['token-env'])
  const permission = parsePermission(values.permission)
  if (!values.http) keepStdoutForFrames()
  const model = chooseModel(values.model)
  const runtime = await startRuntime({ config: values.config, model, sessionDir: values['session-dir'], verbose: values.verbose, checkReady: true })
  if (!runtime.ctx.llm.config.model && !model) {
    await runtime.dispose()
    throw new UsageError('NO_MODEL', `${VERB}: no model to run with: pass --model SPEC (e.g. --model scripted:FILE.yml for a keyless script), set llm.model in --config, or set DEEPSEEK_API_KEY`)
  }
  const { McpServerError, serveMcpOverHttp, serveMcpOverStdio } = await import('@dsh/mcp-server')
  const cap = treeCap(runtime.entries)
  const calls = maxCalls ?? cap.maxConcurrent
  const options = { permission, onCall: logCall, ...(calls !== undefined && { maxCalls: calls }), ...(cap.maxQueued !== undefined && { maxQueued: cap.maxQueued }), ...(maxDepth !== undefined && { maxDepth }) }
  let serving: { close(): Promise<void>; ended?: Promise<string> }
  try {
    if (values.http) {
      const http = await serveMcpOverHttp(runtime.ctx, { ...options, host: values.host ?? '127.0.0.1', port, ...(token !== undefined && { token }) })
      process.stdout.write(`${http.url}\n`)
      process.stderr.write(`dsh mcp: serving ${http.url}${token ? ' (bearer token required)' : ''}; tools: ${[...http.serve.tools.keys()].join(', ')}\n`)
      serving = http
    } else {
      serving = await serveMcpOverStdio(runtime.ctx, options)
    }
  } catch (error) {
    await runtime.dispose()
    if (error instanceof McpServerError) throw new UsageError('USAGE', `${VERB}: ${error.message}`, { cause: error })
    throw error
  }
  process.stderr.write(`dsh mcp: ${whoAnswers(permission)}\n`)
  let stoppedBy: NodeJS.Signals | undefined
  let stop!: () => void
  const stopped = new Promise<void>((resolve) => (stop = resolve))
  // The first SIGTERM/SIGINT stops the server gracefully; a second exits at once, and the
  // exit hook of @dsh/process kills every process group still running.
  const stopSignals = onInterrupt(
    (signal) => {
      stoppedBy = signal
      stop()
    },
    (signal) => process.exit(exitCodeOfSignal(signal)),
  )
  const reason = await Promise.race([stopped.then(() => `stopped by ${stoppedBy}`), ...(serving.ended ? [serving.ended] : [])])
  try {
    await serving.close()
  } finally {
    await runtime.dispose()
    // Closing cancelled every call; a command that ignores SIGTERM must not outlive us either.
    const survivors = await reapTrackedGroups()
    if (survivors.length > 0) process.stderr.write(`dsh mcp: process groups ${survivors.join(', ')} outlived SIGKILL\n`)
    stopSignals()
    if (!values.http) process.stdin.destroy()
  }
  process.stderr.write(`dsh mcp: exiting: ${reason}\n`)
  return 0
}

/**
 * The cap of a delegation tree (`tree.maxConcurrent`, `tree.maxQueued` of the `@dsh/subagent`
 * entry), when the config sets one. The client and its calls are one tree as the client sees
 * it, each call a child; but each call's agent is a root here, whose own tree the gate counts
 * apart, so the server applies the cap to its calls itself.
 */
function treeCap(entries: readonly PluginEntry[]): { maxConcurrent?: number; maxQueued?: number } {
  const tree = entries.find((entry) => entry.name === '@dsh/subagent' && entry.disabled !== true)?.config?.tree
  if (!isRecord(tree)) return {}
  const whole = (value: unknown) => (Number.isSafeInteger(value) && (value as number) >= 1 ? (value as number) : undefined)
  const maxConcurrent = whole(tree.maxConcurrent)
  const maxQueued = whole(tree.maxQueued)
  return { ...(maxConcurrent !== undefined && { maxConcurrent }), ...(maxQueued !== undefined && { maxQueued }) }
}

function parsePermission(raw: string | undefined): PermissionPolicy {
  const read = parsePermissionPolicy(raw)
  if (!read.ok) throw new UsageError('USAGE', `${VERB}: --permission ${read.problem}`)
  return read.value
}

/** The token is read from the named variable, so it never appears in a process listing or a config file (as `dsh a2a serve`'s). */
function readToken(name: string | undefined): string | undefined {
  if (name === undefined) return undefined
  const token = process.env[name]
  if (!token) throw new UsageError('USAGE', `${VERB}: --token-env names ${name}, which is not set (or empty); export the bearer token in it`)
  return token
}

function whoAnswers(permission: PermissionPolicy): string {
  if (permission === 'allow') return 'side effects no approval rule decides are allowed (--permission allow)'
  if (permission === 'reject') return 'side effects no approval rule decides are rejected (--permission reject)'
  return 'side effects no approval rule decides are asked of the client through elicitation, and rejected where the client cannot be asked'
}

/** A call's start and end, one line each on stderr. */
function logCall(event: McpCallEvent): void {
  const about = { what: event.id, where: `tool ${event.tool}`, ...(event.helper !== undefined && { helper: event.helper }) }
  process.stderr.write(event.phase === 'start' ? workStartLine('dsh mcp', about) : workEndLine('dsh mcp', about, { outcome: event.outcome, durationMs: event.durationMs, ...(event.detail !== undefined && { detail: event.detail }), ...(event.usage !== undefined && { usage: event.usage }) }))
}

/** Anything written to stdout through `console` would corrupt the protocol stream: it goes to stderr. */
function keepStdoutForFrames(): void {
  const toStderr = (...parts: unknown[]) => console.error(...parts)
  console.log = toStderr
  console.info = toStderr
  console.debug = toStderr
}
