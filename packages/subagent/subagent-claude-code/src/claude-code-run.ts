/**
 * One delegation to Claude Code: one `query()` of the Agent SDK, one process, read top to
 * bottom. Start the query, wait for its `system/init` message (publication), then let the
 * message stream settle the result; cancellation, a timeout, a crash or the end of the
 * stream settle it otherwise, first one wins. Disposal reaps the process tree.
 *
 * Publication is the `system/init` message: by then the process runs, has parsed its
 * options and settings, and holds a session, so every failure after it belongs to the
 * run (and is an `error` result) while every failure before it is a start failure.
 */
import { query, type Options, type Query, type SDKMessage, type SDKSystemMessage } from '@anthropic-ai/claude-agent-sdk'
import type { AssistantMessage } from '@dsh/llm'
import { SubagentError, type SubagentRequest, type SubagentResult, type SubagentRun } from '@dsh/subagent'
import { ClaudeProcess, describeExit } from './claude-process.js'
import { abortedOf, assistantTextOf, failureOf, resultOf, type Denial } from './outcome.js'
import { permissionOptions, type ClaudeCodeRunSpec } from './run-spec.js'

/** A Claude Code run: a `SubagentRun` plus what identifies the process behind it. */
export interface ClaudeCodeRun extends SubagentRun {
  /** The Claude Code process id, which is also its process group id. */
  readonly pid: number | undefined
  /** Claude Code's own session id (from `system/init`). */
  readonly sessionId: string
}

/** After the process exits, how long its already-written output may take to drain before we stop waiting for it. */
const EXIT_DRAIN_MS = 1_000

/** The stages a start can fail in, named in `START_FAILED` messages. */
type StartStage = 'query' | 'spawn' | 'startup'

export async function startClaudeCodeRun(spec: ClaudeCodeRunSpec, request: SubagentRequest): Promise<ClaudeCodeRun> {
  if (request.signal.aborted) {
    throw new SubagentError('ABORTED', 'the delegation was cancelled before Claude Code was started', { cause: request.signal.reason })
  }
  return new ClaudeCodeQuery(spec, request).start()
}

class ClaudeCodeQuery {
  private readonly process = new ClaudeProcess()
  private readonly abort = new AbortController()
  private readonly assistantMessages: AssistantMessage[] = []
  private readonly denials: Denial[] = []
  private readonly startedAt = Date.now()
  private query: Query | undefined
  private init: SDKSystemMessage | undefined
  private published = false
  private streamEnded = false

  private settledWith: SubagentResult | undefined
  private resolveResult!: (result: SubagentResult) => void
  readonly result = new Promise<SubagentResult>((resolve) => (this.resolveResult = resolve))

  /** Before publication, the one place start failures and the init message meet. */
  private startup!: { resolve: () => void; reject: (error: SubagentError) => void }
  private readonly started = new Promise<void>((resolve, reject) => (this.startup = { resolve, reject }))

  private timer: NodeJS.Timeout | undefined
  private teardown: Promise<void> | undefined
  private disposal: Promise<void> | undefined

  constructor(
    private readonly spec: ClaudeCodeRunSpec,
    private readonly request: SubagentRequest,
  ) {
    // Nothing awaits `started` after a failed start; the rejection is handled in `start`.
    this.started.catch(() => {})
  }

  async start(): Promise<ClaudeCodeRun> {
    const { signal } = this.request
    const onAbort = () => this.failStart('startup', 'ABORTED', 'the delegation was cancelled while Claude Code was starting')
    signal.addEventListener('abort', onAbort, { once: true })
    const startLimit = Math.min(this.spec.startTimeoutMs, this.spec.timeoutMs ?? Infinity)
    this.timer = setTimeout(() => this.failStart('startup', 'START_FAILED', `Claude Code sent no init message within ${startLimit} ms`), startLimit)
    try {
      this.query = query({ prompt: this.spec.prompt, options: this.options() })
    } catch (error) {
      this.failStart('query', 'START_FAILED', `the Agent SDK rejected the query: ${messageOf(error)}`)
    }
    if (this.query) void this.consume(this.query)
    void this.process.exited().then(() => this.afterExit())
    try {
      await this.started
    } catch (error) {
      // Reap before rejecting: a failed start leaves no process behind.
      await this.stop().catch((reapError: unknown) => {
        throw new SubagentError('START_FAILED', `${messageOf(error)}; and reaping the process failed: ${messageOf(reapError)}`, { cause: error })
      })
      throw error
    } finally {
      clearTimeout(this.timer)
      signal.removeEventListener('abort', onAbort)
    }
    return this.publish()
  }

  private options(): Options {
    return {
      abortController: this.abort,
      cwd: this.spec.cwd,
      env: this.spec.env,
      pathToClaudeCodeExecutable: this.spec.executable,
      spawnClaudeCodeProcess: this.process.spawn,
      persistSession: false,
      // A subagent has nobody to answer its questions.
      disallowedTools: ['AskUserQuestion'],
      ...permissionOptions(this.spec.permissionMode, this.denials),
      ...(this.spec.model !== undefined && { model: this.spec.model }),
    }
  }

  private publish(): ClaudeCodeRun {
    this.published = true
    const { signal } = this.request
    const onAbort = () => this.cancel(signal.reason)
    signal.addEventListener('abort', onAbort, { once: true })
    if (this.spec.timeoutMs !== undefined && !this.settledWith) {
      const left = Math.max(0, this.startedAt + this.spec.timeoutMs - Date.now())
      this.timer = setTimeout(() => this.fail(`Claude Code did not finish within timeoutMs (${this.spec.timeoutMs} ms)`), left)
    }
    // Aborted between init and here: the listener above can no longer fire.
    if (signal.aborted) this.cancel(signal.reason)
    const run: ClaudeCodeRun = {
      id: `${this.spec.provider}:${this.init!.session_id}`,
      local: false,
      result: this.result,
      pid: this.process.pid,
      sessionId: this.init!.session_id,
      cancel: (reason?: unknown) => this.cancel(reason),
      dispose: () => {
        this.disposal ??= (async () => {
          signal.removeEventListener('abort', onAbort)
          this.cancel('the run was disposed')
          await this.stop()
        })()
        return this.disposal
      },
    }
    return run
  }

  /** Reads every message until the stream ends; never throws. */
  private async consume(messages: Query): Promise<void> {
    let failure: unknown
    try {
      for await (const message of messages) this.onMessage(message)
    } catch (error) {
      failure = error
    }
    this.streamEnded = true
    await this.onStreamEnd(failure)
  }

  private onMessage(message: SDKMessage): void {
    switch (message.type) {
      case 'system':
        if (message.subtype === 'init' && !this.init) {
          this.init = message
          this.startup.resolve()
        }
        return
      case 'assistant': {
        const texts = assistantTextOf(message)
        if (texts) this.assistantMessages.push(texts)
        return
      }
      case 'result':
        if (!this.init) {
          const { diagnostic } = resultOf(message, [], this.denials)
          return this.failStart('startup', 'START_FAILED', `Claude Code ended before its init message: ${diagnostic}`)
        }
        return this.settle(resultOf(message, this.assistantMessages, this.denials))
      default:
        // Progress, status, hooks, tasks, stream events…: none changes the outcome.
        return
    }
  }

  /** The stream ended or broke: after publication without a result that is a failure; before it, a start failure. */
  private async onStreamEnd(failure: unknown): Promise<void> {
    if (this.settledWith) return
    // The exit status explains most ends; give the exit event a moment to arrive.
    const exit = this.process.exit ?? (await Promise.race([this.process.exited(), delay(EXIT_DRAIN_MS)]))
    const cause = failure === undefined ? 'its message stream ended without a result' : messageOf(failure)
    // The SDK's own message often names the exit already; say it once.
    const exitNote = exit && !cause.includes(exit.signal ?? `code ${exit.code}`) ? describeExit(exit) : ''
    const facts = [cause, exitNote, this.stderrNote()].filter(Boolean).join('; ')
    if (!this.init) {
      const stage: StartStage = !this.process.spawned || this.process.exit?.spawnError ? 'spawn' : 'startup'
      return this.failStart(stage, 'START_FAILED', facts)
    }
    this.fail(`Claude Code stopped mid-run (stage running): ${facts}`)
  }

  /** The process exited; if its output does not end soon after (a grandchild may hold the pipe), stop waiting for it. */
  private async afterExit(): Promise<void> {
    if (this.streamEnded) return
    await delay(EXIT_DRAIN_MS)
    if (!this.streamEnded) await this.onStreamEnd(new Error('the process exited but its output did not end'))
  }

  private failStart(stage: StartStage, code: 'START_FAILED' | 'ABORTED', message: string): void {
    if (this.published) return
    const text = code === 'ABORTED' ? message : `Claude Code could not be started (stage ${stage}): ${message}`
    this.startup.reject(new SubagentError(code, text))
  }

  /** First outcome wins; later ones (e.g. the SDK's throw after an error result) are ignored. */
  private settle(result: SubagentResult): void {
    if (this.settledWith) return
    this.settledWith = result
    clearTimeout(this.timer)
    this.resolveResult(result)
  }

  private fail(diagnostic: string): void {
    if (this.settledWith) return
    this.settle(failureOf(diagnostic, this.assistantMessages, this.denials))
    void this.stop().catch(() => {
      // Reported by dispose(), which awaits the same teardown and is the caller's obligation.
    })
  }

  private cancel(reason: unknown): void {
    if (!this.settledWith) this.settle(abortedOf(this.assistantMessages, this.denials, `cancelled: ${typeof reason === 'string' ? reason : messageOf(reason ?? 'cancelled')}`))
    void this.stop().catch(() => {
      // As in fail(): dispose() reports a failed teardown.
    })
  }

  /** Close the query and reap the process tree, once. */
  private stop(): Promise<void> {
    this.teardown ??= (async () => {
      clearTimeout(this.timer)
      this.abort.abort()
      try {
        this.query?.close()
      } catch {
        // close() on an already-ended query has nothing left to close.
      }
      await this.process.dispose(this.spec.graceMs)
    })()
    return this.teardown
  }

  private stderrNote(): string {
    const tail = this.process.stderrTail()
    return tail ? `stderr: ${tail.split('\n').slice(-5).join(' | ')}` : ''
  }
}

function delay(ms: number): Promise<undefined> {
  return new Promise((resolve) => setTimeout(() => resolve(undefined), ms).unref())
}

function messageOf(error: unknown): string {
  return error instanceof Error ? error.message : String(error)
}
