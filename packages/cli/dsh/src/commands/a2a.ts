/**
 * `dsh a2a serve`: a dsh agent behind the Agent2Agent protocol over HTTP, for A2A clients
 * and for dsh parents whose `a2a` subagent provider lists this worker. Each A2A context is
 * one dsh session (origin `a2a`, the lineage its first message carries), each of its tasks
 * a turn run until the agent is quiet; push notifications go only where --webhook-allow
 * and --webhook-allow-network say (`@dsh/a2a-server`). A side effect no approval rule decided is
 * put through input-required (`--permission ask`, the default) to the approver
 * (`--approver-token-env NAME`: only a message carrying that token answers) or, with
 * `--trust-caller-approvals`, to the task's caller; with neither it is rejected, since a
 * caller must not approve its own side effects. Or the server decides alone
 * (`--permission allow|reject`), except that `allow` never widens a dsh parent's tree: a
 * task whose lineage does not allow what no rule decides is asked of the approver or the
 * trusted caller as under `ask`, else rejected. The URL it serves is printed on stdout as the only line there; logs go to
 * stderr, among them one line as each task starts and one as it ends (`work-log.ts`). It runs until SIGTERM/SIGINT: every task is cancelled (its turn ends `aborted`,
 * its tasks and children are stopped), every session is flushed, every process group it
 * started is taken down, and the exit code is 0. A second signal exits at once.
 */
import { parseVerbArgs, wholeNumberOption } from '../args.js'
import { A2aServerError, serveA2a, type A2aTaskEvent, type PermissionPolicy } from '@dsh/a2a-server'
import { reapTrackedGroups } from '@dsh/process'
import { UsageError } from '../errors.js'
import { parsePermissionPolicy } from '@dsh/approvals'
import { exitCodeOfSignal } from '../exit.js'
import { onInterrupt } from '../interrupt.js'
import { chooseModel } from '../run.js'
import { startRuntime } from '../runtime.js'
import { workEndLine, workStartLine } from './work-log.js'

/** How this verb's messages name it. */
const VERB = 'dsh a2a serve'

export async function a2aVerb(args: string[]): Promise<number> {
  const { values, positionals } = parseVerbArgs('a2a', {
    args,
    allowPositionals: true,
    options: {
      host: { type: 'string', default: '127.0.0.1' },
      port: { type: 'string', default: '7700' },
      'token-env': { type: 'string' },
      'public-url': { type: 'string' },
      'max-tasks': { type: 'string' },
      'max-depth': { type: 'string' },
      'webhook-allow': { type: 'string', multiple: true },
      'webhook-allow-network': { type: 'string', multiple: true },
      permission: { type: 'string', default: 'ask' },
      'approver-token-env': { type: 'string' },
      'trust-caller-approvals': { type: 'boolean', default: false },
      config: { type: 'string' },
      model: { type: 'string' },
      'session-dir': { type: 'string' },
      verbose: { type: 'boolean', default: false },
    },
  })
  if (positionals.length !== 1 || positionals[0] !== 'serve') throw new UsageError('USAGE', 'dsh a2a: the only verb is `serve` (dsh a2a serve [--host H] [--port P] [--token-env NAME])')
  const port = wholeNumberOption(VERB, '--port', values.port, 0, 65_535)!
  const maxTasks = wholeNumberOption(VERB, '--max-tasks', values['max-tasks'], 1)
  const maxDepth = wholeNumberOption(VERB, '--max-depth', values['max-depth'], 0)
  const token = readToken(values['token-env'], '--token-env')
  const approverToken = readToken(values['approver-token-env'], '--approver-token-env')
  const permission = parsePermission(values.permission)
  const model = chooseModel(values.model)
  const runtime = await startRuntime({ config: values.config, model, sessionDir: values['session-dir'], verbose: values.verbose, checkReady: true })
  if (!runtime.ctx.llm.config.model && !model) {
    await runtime.dispose()
    throw new UsageError('NO_MODEL', 'dsh a2a serve: no model to run with: pass --model SPEC (e.g. --model scripted:examples/acp-child.yml), set llm.model in --config, or set DEEPSEEK_API_KEY')
  }
  // Fail closed: without the broker nothing would stand between a caller elsewhere and this machine's side effects.
  if (!runtime.ctx.get('approvals')) {
    await runtime.dispose()
    throw new UsageError('USAGE', 'dsh a2a serve: the composition has no approval broker (- id: approvals, name: "@dsh/approvals"), so nothing would decide the side effects its callers ask for; add it back to dsh.yml')
  }
  let server
  try {
    const webhooks = { allow: values['webhook-allow'] ?? [], allowNetworks: values['webhook-allow-network'] ?? [] }
    server = await serveA2a(runtime.ctx, { host: values.host, port, token, maxTasks, maxDepth, publicUrl: values['public-url'], webhooks, permission, approverToken, trustCallerApprovals: values['trust-caller-approvals'], onTask: logTask })
  } catch (error) {
    await runtime.dispose()
    if (error instanceof A2aServerError) throw new UsageError('USAGE', `dsh a2a serve: ${error.message}`, { cause: error })
    throw error
  }
  process.stdout.write(`${server.url}\n`)
  process.stderr.write(`dsh a2a: serving ${server.url} (card at ${server.url}/.well-known/agent-card.json${token ? ', bearer token required for tasks' : ''})\n`)
  process.stderr.write(`dsh a2a: ${whoAnswers(permission, approverToken !== undefined, values['trust-caller-approvals'])}\n`)
  // The first SIGTERM/SIGINT stops the server gracefully; a second exits at once, and the
  // exit hook of @dsh/process kills every process group still running.
  let stop!: () => void
  const stopped = new Promise<void>((resolve) => (stop = resolve))
  const stopSignals = onInterrupt(
    () => stop(),
    (signal) => process.exit(exitCodeOfSignal(signal)),
  )
  await stopped
  try {
    await server.close()
  } finally {
    await runtime.dispose()
    // Closing cancelled every task; a command that ignores SIGTERM must not outlive us either.
    const survivors = await reapTrackedGroups()
    if (survivors.length > 0) process.stderr.write(`dsh a2a: process groups ${survivors.join(', ')} outlived SIGKILL\n`)
    stopSignals()
  }
  return 0
}

/** `--permission ask|allow|reject`: who decides a side effect no approval rule decided. */
function parsePermission(raw: string | undefined): PermissionPolicy {
  const read = parsePermissionPolicy(raw)
  if (!read.ok) throw new UsageError('USAGE', `${VERB}: --permission ${read.problem}`)
  return read.value
}

/** A token is read from the named variable, so it never appears in a process listing or a config file. */
function readToken(name: string | undefined, flag: string): string | undefined {
  if (name === undefined) return undefined
  const token = process.env[name]
  if (!token) throw new UsageError('USAGE', `dsh a2a serve: ${flag} names ${name}, which is not set (or empty); export the bearer token in it`)
  return token
}

/** One line on stderr at start: who decides what no approval rule decided. */
function whoAnswers(permission: PermissionPolicy, approver: boolean, trustCallers: boolean): string {
  if (permission === 'reject') return 'side effects no approval rule decides are rejected (--permission reject)'
  if (permission === 'allow') {
    const bounded = trustCallers ? "asked of the task's caller (--trust-caller-approvals)" : approver ? 'asked of the approver (--approver-token-env)' : 'rejected (pass --trust-caller-approvals or --approver-token-env NAME to have them asked)'
    return `side effects no approval rule decides are allowed (--permission allow), except in a task a dsh parent delegated whose lineage does not allow them: those are ${bounded}`
  }
  if (trustCallers) return "side effects no approval rule decides are asked of the task's caller (--trust-caller-approvals)"
  if (approver) return 'side effects no approval rule decides wait for the approver (--approver-token-env); a task\'s caller cannot answer them'
  return "side effects no approval rule decides are rejected: a task's caller may not approve its own; pass --approver-token-env NAME or --trust-caller-approvals to have them asked"
}

/** A task's start and end, one line each on stderr. */
function logTask(event: A2aTaskEvent): void {
  const about = { what: `task ${event.id}`, where: `context ${event.contextId}`, ...(event.skill !== undefined && { helper: event.skill }), ...(event.label !== undefined && { label: event.label }) }
  process.stderr.write(event.phase === 'start' ? workStartLine('dsh a2a', about) : workEndLine('dsh a2a', about, { outcome: event.state, durationMs: event.durationMs, ...(event.usage !== undefined && { usage: event.usage }) }))
}
