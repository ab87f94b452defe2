/**
 * Who decides, in `dsh run`, whether a side-effecting tool (bash, or any tool marked
 * `sideEffecting`) may run for the root agent or any child in this process: a permission
 * gate on `ctx.tools` (see `addPermissionGate` in `@dsh/tools`).
 *
 * - `ask` (the default when standard input and the output are a terminal): the user is
 *   asked for each call, naming the agent that wants it (`dsh › spawn "survey"`), the tool
 *   and its arguments; answers are allow once, allow this same call always for the rest of
 *   the run, or reject. Several children's requests wait their turn: one prompt at a time.
 *   The live tree stands aside while a prompt is up.
 * - `allow`: every call runs, unasked.
 * - `reject` (the default otherwise: nobody is there to ask): every call is refused, and
 *   one line on stderr says how to let them run.
 */
import { printable } from '@dsh/base'
import type { Context } from 'cordis'
import type { ToolPermissionDecision, ToolPermissionRequest } from '@dsh/tools'
import { UsageError } from './errors.js'
import { truncateColumns } from '@dsh/subagent'

export type RunPermission = 'ask' | 'allow' | 'reject'
export const RUN_PERMISSIONS: readonly RunPermission[] = ['ask', 'allow', 'reject']

export function parseRunPermission(raw: string | undefined): RunPermission | undefined {
  if (raw === undefined) return undefined
  const policy = RUN_PERMISSIONS.find((candidate) => candidate === raw)
  if (!policy) throw new UsageError('USAGE', `dsh run: --permission must be one of ${RUN_PERMISSIONS.join(', ')} (got ${JSON.stringify(raw)})`)
  return policy
}

/** The terminal a prompt is asked on, and what must stand aside while it is. */
export interface PromptTerminal {
  input: NodeJS.ReadStream
  output: NodeJS.WriteStream
  /** Clears the live tree and keeps it from redrawing; the returned function brings it back. */
  standAside(): () => void
}

export interface PermissionOptions {
  policy: RunPermission
  /** Required for `ask`. */
  terminal?: PromptTerminal
  /** Where the one-line hint of `reject` goes. */
  warn(line: string): void
}

/** Install the gate for `policy`; returns its disposer. */
export function installRunPermission(ctx: Context, options: PermissionOptions): () => void {
  const { policy } = options
  switch (policy) {
    case 'allow':
      return ctx.tools.addPermissionGate(() => ({ decision: 'allow-once', by: 'dsh run --permission allow' }))
    case 'reject': {
      let hinted = false
      return ctx.tools.addPermissionGate((request) => {
        if (!hinted) {
          hinted = true
          options.warn(`dsh: ${request.tool.name} was not run: nobody is asked when dsh run is not on a terminal, so side-effecting tools are refused; --permission allow lets them run unasked`)
        }
        return { decision: 'reject', by: 'dsh run --permission reject', reason: 'side-effecting tools are refused in this run (dsh run --permission reject); do without it' }
      })
    }
    case 'ask': {
      if (!options.terminal) throw new Error('dsh run --permission ask needs a terminal')
      const prompt = new PermissionPrompt(ctx, options.terminal)
      return ctx.tools.addPermissionGate((request) => prompt.ask(request))
    }
  }
}

/** How many characters of a call's arguments a prompt shows. */
const ARGS_COLUMNS = 400

class PermissionPrompt {
  /** Calls the user allowed always, as `tool\0arguments`. */
  private readonly always = new Set<string>()
  /** The prompt on screen now, or the end of the one before: one at a time. */
  private queue: Promise<unknown> = Promise.resolve()

  constructor(
    private readonly ctx: Context,
    private readonly terminal: PromptTerminal,
  ) {}

  ask(request: ToolPermissionRequest): Promise<ToolPermissionDecision> {
    const asked = this.queue.then(() => this.askNow(request))
    this.queue = asked.catch(() => undefined)
    return asked
  }

  private async askNow(request: ToolPermissionRequest): Promise<ToolPermissionDecision> {
    const key = `${request.tool.name}\0${JSON.stringify(request.call.args)}`
    if (this.always.has(key)) return { decision: 'allow-always', by: 'the user (earlier in this run)' }
    if (request.signal.aborted) return { decision: 'reject', by: 'dsh run', reason: 'the call was cancelled before it could be asked about' }
    const question = `${this.agentPath(request.agent.id)} wants to run ${request.tool.name}: ${describeArgs(request.tool.name, request.call.args)}`
    const answer = await this.readAnswer(question, request.signal)
    switch (answer) {
      case 'once':
        return { decision: 'allow-once', by: 'the user' }
      case 'always':
        this.always.add(key)
        return { decision: 'allow-always', by: 'the user' }
      case 'reject':
        return { decision: 'reject', by: 'the user', reason: 'the user rejected this call' }
      case 'cancelled':
        return { decision: 'reject', by: 'dsh run', reason: 'the call was cancelled while the user was asked' }
    }
  }

  /** `dsh › spawn "survey the repo" › fork "check"`: who wants it, from the root down. */
  private agentPath(agentId: string): string {
    const names: string[] = []
    let id: string | undefined = agentId
    for (let hops = 0; id !== undefined && hops < 64; hops++) {
      const agent = this.ctx.agents.get(id)
      if (!agent) break
      const { header } = agent.session
      names.unshift(agent.depth === 0 ? 'dsh' : `${header.provider ?? 'child'}${header.label ? ` "${header.label}"` : ''}`)
      id = header.parentSession
    }
    return names.join(' › ') || 'an agent'
  }

  private readAnswer(question: string, signal: AbortSignal): Promise<'once' | 'always' | 'reject' | 'cancelled'> {
    const { input, output } = this.terminal
    const bringBack = this.terminal.standAside()
    const width = Math.max(40, (output.columns ?? 100) - 1)
    const lines = [truncateColumns(printable(question), width), '  [y] allow once   [a] allow this call always in this run   [n] reject']
    output.write(`${lines.join('\n')}\n? `)
    const wasRaw = input.isRaw
    input.setRawMode?.(true)
    input.resume()
    return new Promise((resolve) => {
      const finish = (answer: 'once' | 'always' | 'reject' | 'cancelled', echo: string) => {
        input.off('data', onData)
        signal.removeEventListener('abort', onAbort)
        input.setRawMode?.(wasRaw)
        input.pause()
        // The prompt leaves one line behind, the decision, so the screen keeps a record.
        output.write(`\x1b[${lines.length}F\x1b[J${truncateColumns(printable(`${question} → ${echo}`), width)}\n`)
        bringBack()
        resolve(answer)
      }
      const onData = (data: Buffer) => {
        const key = data.toString('utf8')
        if (key === 'y' || key === 'Y') return finish('once', 'allowed once')
        if (key === 'a' || key === 'A') return finish('always', 'allowed always in this run')
        if (key === 'n' || key === 'N' || key === '\r' || key === '\x1b') return finish('reject', 'rejected')
        if (key === '\x03') {
          // Raw mode swallows Ctrl-C: refuse the call and pass the interrupt on as the user meant it.
          finish('reject', 'rejected (Ctrl-C)')
          process.kill(process.pid, 'SIGINT')
        }
      }
      const onAbort = () => finish('cancelled', 'cancelled')
      input.on('data', onData)
      signal.addEventListener('abort', onAbort, { once: true })
    })
  }
}

/** A call's arguments as a prompt shows them: a command as it is, anything else as compact JSON. */
function describeArgs(tool: string, args: unknown): string {
  if (tool === 'bash' && typeof args === 'object' && args !== null && typeof (args as { command?: unknown }).command === 'string') {
    return (args as { command: string }).command.replace(/\s*\n\s*/g, ' ⏎ ').slice(0, ARGS_COLUMNS)
  }
  return JSON.stringify(args).slice(0, ARGS_COLUMNS)
}
