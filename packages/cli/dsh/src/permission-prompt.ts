/**
 * Who answers, in `dsh run`, the approval broker's requests (`@dsh/approvals`): every
 * side effect of the root agent or of any child anywhere down the tree that its rules did
 * not decide.
 *
 * - `ask` (the default when standard input and the output are a terminal): the user is
 *   asked, naming the agent that wants it from the root down (`dsh › spawn "survey" ›
 *   acp "review" › spawn "check"`), the tool and its arguments; answers are allow once,
 *   allow this same request always in this tree, or reject. The broker puts one request on
 *   screen at a time, taking the waiting ones in turn from each child; the live tree
 *   stands aside while a prompt is up.
 * - `allow`: what no rule decided runs, unasked.
 * - `reject` (the default otherwise: nobody is there to ask): what no rule decided is
 *   refused, and one line on stderr says how to let it run.
 */
import { printable } from '@dsh/base'
import type { Context } from 'cordis'
import { parsePermissionPolicy, PERMISSION_POLICIES, type ApprovalRequestInfo, type FrontEndAnswer, type PermissionPolicy } from '@dsh/approvals'
import { UsageError } from './errors.js'
import { truncateColumns } from '@dsh/subagent'

/** The policies of `dsh run --permission`: the approval wire's, read by its one parser. */
export type RunPermission = PermissionPolicy
export const RUN_PERMISSIONS: readonly RunPermission[] = PERMISSION_POLICIES

export function parseRunPermission(raw: string | undefined): RunPermission | undefined {
  if (raw === undefined) return undefined
  const read = parsePermissionPolicy(raw)
  if (!read.ok) throw new UsageError('USAGE', `dsh run: --permission ${read.problem}`)
  return read.value
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

/** Let `policy` answer the broker's requests for this run; returns the disposer. */
export function installRunPermission(ctx: Context, options: PermissionOptions): () => void {
  const { policy } = options
  const approvals = ctx.get('approvals')
  if (!approvals) throw new UsageError('USAGE', 'dsh run: the composition has no approval broker (- id: approvals, name: "@dsh/approvals"), so nobody could decide side effects; add it back to dsh.yml')
  switch (policy) {
    case 'allow':
      return approvals.setDefault('allow', 'dsh run --permission allow')
    case 'reject': {
      let hinted = false
      const removeDefault = approvals.setDefault('reject', 'dsh run --permission reject')
      const removeHint = approvals.addRecorder({
        record: (request, _session, decision) => {
          if (hinted || decision.decision !== 'reject' || decision.source !== 'default') return
          hinted = true
          options.warn(`dsh: ${request.tool} was not run: nobody is asked when dsh run is not on a terminal, so side effects no rule allows are refused; --permission allow lets them run unasked, and approvals rules in dsh.yml allow some`)
        },
      })
      return () => {
        removeHint()
        removeDefault()
      }
    }
    case 'ask': {
      if (!options.terminal) throw new Error('dsh run --permission ask needs a terminal')
      const { terminal } = options
      return approvals.addFrontEnd({ name: 'the user at the terminal', oneAtATime: true, ask: (request, signal) => askOnTerminal(terminal, request, signal) })
    }
  }
}

/** One request on the terminal: the question, the three answers, one key. */
async function askOnTerminal(terminal: PromptTerminal, request: ApprovalRequestInfo, signal: AbortSignal): Promise<FrontEndAnswer> {
  if (signal.aborted) return { decision: 'reject', by: 'dsh run', reason: 'the request was withdrawn before it could be asked', source: 'cancelled' }
  const rule = request.rule !== undefined ? ` (rule ${request.rule})` : ''
  const question = `${request.path.join(' › ')} wants to run ${request.tool}${rule}: ${request.display}`
  const answer = await readAnswer(terminal, question, signal)
  switch (answer) {
    case 'once':
      return { decision: 'allow-once', by: 'the user at the terminal' }
    case 'always':
      return { decision: 'allow-always', by: 'the user at the terminal' }
    case 'reject':
      return { decision: 'reject', by: 'the user at the terminal', reason: 'the user rejected it' }
    case 'cancelled':
      return { decision: 'reject', by: 'dsh run', reason: 'the request was withdrawn while the user was asked', source: 'cancelled' }
  }
}

/**
 * Keys that arrive this soon after a prompt is drawn were typed before the user could read
 * it (a second "y" meant for the prompt before, typing meant for the model): ignored.
 */
export const TYPEAHEAD_GUARD_MS = 150

/** Read one answer to `question` on the terminal: one key, typed after the prompt was drawn. */
export function readAnswer(terminal: PromptTerminal, question: string, signal: AbortSignal): Promise<'once' | 'always' | 'reject' | 'cancelled'> {
  const { input, output } = terminal
  const bringBack = terminal.standAside()
  const width = Math.max(40, (output.columns ?? 100) - 1)
  const lines = [truncateColumns(printable(question), width), '  [y] allow once   [a] allow this request always in this run   [n] reject']
  output.write(`${lines.join('\n')}\n? `)
  const wasRaw = input.isRaw
  input.setRawMode?.(true)
  input.resume()
  const drawnAt = Date.now()
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
      if (key === '\x03') {
        // Raw mode swallows Ctrl-C: refuse the request and pass the interrupt on as the user meant it.
        finish('reject', 'rejected (Ctrl-C)')
        process.kill(process.pid, 'SIGINT')
        return
      }
      // Typed ahead, or several keys at once (a paste, an arrow key): not an answer to this prompt.
      if (Date.now() - drawnAt < TYPEAHEAD_GUARD_MS || key.length !== 1) return
      if (key === 'y' || key === 'Y') return finish('once', 'allowed once')
      if (key === 'a' || key === 'A') return finish('always', 'allowed always in this run')
      if (key === 'n' || key === 'N' || key === '\r' || key === '\x1b') return finish('reject', 'rejected')
    }
    const onAbort = () => finish('cancelled', 'withdrawn')
    input.on('data', onData)
    signal.addEventListener('abort', onAbort, { once: true })
  })
}
