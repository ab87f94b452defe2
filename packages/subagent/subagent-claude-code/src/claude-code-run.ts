/**
 * The Claude Code wire of one delegation: one `query()` of the Agent SDK, one process.
 * The run's lifecycle (start-up race, first-wins settle, timeout, the process exiting,
 * dispose once) is `@dsh/subagent`'s remote run core; this file reads the SDK's message
 * stream onto it.
 *
 * Publication is the `system/init` message: by then the process runs, has parsed its
 * options and settings, and holds a session, so every failure after it belongs to the
 * run (and is an `error` result) while every failure before it is a start failure.
 * Claude Code has no interrupt a run could wait on: a cancel ends the run at once and
 * stops the query.
 */
import { createRequire } from 'node:module'
import type { Options, Query, SDKMessage } from '@anthropic-ai/claude-agent-sdk'
import { errorMessage, type StopReason } from '@dsh/base'
import type { AssistantMessage } from '@dsh/llm'
import { EXIT_DRAIN_MS, startRemoteRun, SubagentError, type RemoteRunControl, type RemoteSubagentRun, type RemoteWire, type SubagentRequest, type SubagentResult, type SubagentUsage } from '@dsh/subagent'
import { describeExit as describeTreeExit } from '@dsh/process'
import { ClaudeProcess, describeExit } from './claude-process.js'
import { assistantTextOf, endingOf, resultOf, type Denial } from './outcome.js'
import { permissionOptions, type ClaudeCodeRunSpec } from './run-spec.js'
import { ClaudeCodeProgressReader, usageOfResult } from './progress.js'

/** A Claude Code run: `remoteId` is Claude Code's own session id (from `system/init`), `pid` its process group. */
export type ClaudeCodeRun = RemoteSubagentRun

/** The stages a run passes through, named in its messages. */
export type ClaudeCodeStage = 'query' | 'spawn' | 'startup' | 'running'

const CHILD_NAME = 'Claude Code'

type AgentSdk = typeof import('@anthropic-ai/claude-agent-sdk')
let agentSdk: AgentSdk | undefined

/**
 * The Agent SDK, loaded at the first run: it is an optional peer, so this package loads
 * without it and the plugin says at start-up what to install (`missingClaudeCodePackage`).
 */
function query(params: Parameters<AgentSdk['query']>[0]): Query {
  agentSdk ??= createRequire(import.meta.url)('@anthropic-ai/claude-agent-sdk') as AgentSdk
  return agentSdk.query(params)
}

export function startClaudeCodeRun(spec: ClaudeCodeRunSpec, request: SubagentRequest): Promise<ClaudeCodeRun> {
  const claude = new ClaudeProcess()
  return startRemoteRun(
    request,
    {
      provider: spec.provider,
      childName: CHILD_NAME,
      initialStage: 'query' satisfies ClaudeCodeStage,
      startupTimeoutMs: spec.startTimeoutMs,
      startupTimeoutKey: 'startTimeoutMs',
      timeoutMs: spec.timeoutMs,
      // `timeoutMs` bounds the whole run, start included.
      timeoutIncludesStartup: true,
      cancelGraceMs: spec.graceMs,
      cancelGraceKey: 'graceMs',
      process: {
        get pid() {
          return claude.pid
        },
        exited: () => claude.exited(),
        stderr: () => claude.stderrTail(),
        howItEnded: () => {
          const exit = claude.exit
          if (!exit) return 'stopped answering'
          return exit.spawnError ? `could not be started: ${exit.spawnError.message}` : describeTreeExit(exit)
        },
      },
    },
    (run) => new ClaudeCodeWire(spec, run, claude),
  )
}

class ClaudeCodeWire implements RemoteWire {
  private readonly abort = new AbortController()
  private readonly assistantMessages: AssistantMessage[] = []
  private readonly denials: Denial[] = []
  private readonly progress: ClaudeCodeProgressReader
  private usage: SubagentUsage | undefined
  private query: Query | undefined
  private initSeen = false
  /** Before publication, the one place start failures and the init message meet. */
  private startup!: { resolve: (sessionId: string) => void; reject: (error: SubagentError) => void }
  private readonly started = new Promise<string>((resolve, reject) => (this.startup = { resolve, reject }))

  constructor(
    private readonly spec: ClaudeCodeRunSpec,
    private readonly run: RemoteRunControl,
    private readonly claude: ClaudeProcess,
  ) {
    // Nothing awaits `started` after a failed start; the core has the rejection already.
    this.started.catch(() => {})
    this.progress = new ClaudeCodeProgressReader(run, (reason) => spec.progressDropped?.(reason))
  }

  open(): Promise<string> {
    // The SDK may spawn inside query(): the spawn hook moves the stage on from here.
    this.run.moveTo('spawn')
    try {
      this.query = query({ prompt: this.spec.prompt, options: this.options() })
    } catch (error) {
      this.run.moveTo('query')
      this.startup.reject(this.startFailed(`the Agent SDK rejected the query: ${errorMessage(error)}`))
      return this.started
    }
    void this.consume(this.query)
    return this.started
  }

  private options(): Options {
    return {
      abortController: this.abort,
      cwd: this.spec.cwd,
      env: this.spec.env,
      pathToClaudeCodeExecutable: this.spec.executable,
      spawnClaudeCodeProcess: (options) => {
        const child = this.claude.spawn(options)
        this.run.moveTo('startup')
        return child
      },
      // A one-shot child leaves no transcript; a continuable one must, to be resumed.
      persistSession: this.spec.session !== undefined,
      ...(this.spec.session && (this.spec.session.resume ? { resume: this.spec.session.id } : { sessionId: this.spec.session.id })),
      // A subagent has nobody to answer its questions.
      disallowedTools: ['AskUserQuestion'],
      ...permissionOptions(this.spec.permissionMode, this.denials),
      ...(this.spec.model !== undefined && { model: this.spec.model }),
      // Text as it streams, for a parent that listens; nobody listening, nobody pays for it.
      ...(this.run.reporting && { includePartialMessages: true }),
    }
  }

  begin(): void {
    this.run.moveTo('running')
  }

  /** Reads every message until the stream ends; never throws. */
  private async consume(messages: Query): Promise<void> {
    let failure: unknown
    try {
      for await (const message of messages) this.onMessage(message)
    } catch (error) {
      failure = error
    }
    await this.onStreamEnd(failure)
  }

  private onMessage(message: SDKMessage): void {
    this.progress.read(message)
    switch (message.type) {
      case 'system':
        if (message.subtype === 'init' && !this.initSeen) {
          this.initSeen = true
          this.startup.resolve(message.session_id)
        }
        return
      case 'assistant': {
        const texts = assistantTextOf(message)
        if (texts) this.assistantMessages.push(texts)
        return
      }
      case 'result': {
        if (!this.initSeen) {
          const { diagnostic } = resultOf(message, [], this.denials)
          return this.startup.reject(this.startFailed(`Claude Code ended before its init message: ${diagnostic}`))
        }
        this.usage = usageOfResult(message)
        return this.run.settle(this.withUsage(resultOf(message, this.assistantMessages, this.denials)))
      }
      default:
        // Progress, status, hooks, tasks, stream events…: none changes the outcome.
        return
    }
  }

  /** The stream ended or broke: after publication without a result that is a failure; before it, a start failure. */
  private async onStreamEnd(failure: unknown): Promise<void> {
    const { run, claude } = this
    if (run.settled) return
    // The exit status explains most ends; give the exit event a moment to arrive.
    const exit = claude.exit ?? (await Promise.race([claude.exited(), delay(EXIT_DRAIN_MS)]))
    const cause = failure === undefined ? 'its message stream ended without a result' : errorMessage(failure)
    // The SDK's own message often names the exit already; say it once.
    const exitNote = exit && !cause.includes(exit.signal ?? `code ${exit.code}`) ? describeExit(exit) : ''
    const facts = run.withStderr([cause, exitNote].filter(Boolean).join('; '))
    if (!this.initSeen) {
      if (!claude.spawned || claude.exit?.spawnError) run.moveTo('spawn')
      return this.startup.reject(this.startFailed(facts))
    }
    run.fail(`Claude Code stopped during running: ${facts}`)
  }

  startFailed(message: string): SubagentError {
    return new SubagentError('START_FAILED', `Claude Code could not be started (stage ${this.run.stage}): ${message}`)
  }

  result(stopReason: StopReason, diagnostic: string | undefined): SubagentResult {
    return this.withUsage(endingOf(stopReason, diagnostic, this.assistantMessages, this.denials))
  }

  private withUsage(result: SubagentResult): SubagentResult {
    return this.usage ? { ...result, usage: this.usage } : result
  }

  /** Close the query and reap the process tree. */
  async close(): Promise<void> {
    this.abort.abort()
    try {
      this.query?.close()
    } catch {
      // close() on an already-ended query has nothing left to close.
    }
    await this.claude.dispose(this.spec.graceMs)
  }
}

function delay(ms: number): Promise<undefined> {
  return new Promise((resolve) => setTimeout(() => resolve(undefined), ms).unref())
}
