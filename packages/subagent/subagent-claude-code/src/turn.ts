/**
 * One Claude Code turn: the provider's turn file, one `query()` of the Agent SDK read to
 * its end. The turn is accepted at Claude Code's `system/init` message: by then the
 * process runs, has parsed its options and settings, and holds a session, so every
 * failure after it belongs to the turn (an `error` result) while every failure before it
 * is a start failure. Claude Code has no interrupt a turn could wait on: a cancel ends it
 * at once and stops the query (`@dsh/subagent`'s remote lifecycle decides that, and the
 * timeout, and the process exiting).
 */
import type { Options, Query, SDKMessage } from '@anthropic-ai/claude-agent-sdk'
import { errorMessage, type StopReason } from '@dsh/base'
import type { AssistantMessage, TextBlock } from '@dsh/llm'
import { EXIT_DRAIN_MS, SubagentError, type RemoteTurn, type SubagentResult, type SubagentUsage, type TurnControl } from '@dsh/subagent'
import { describeExit } from './claude-process.js'
import { assistantTextOf, endingOf, resultOf, type Denial } from './outcome.js'
import { ClaudeCodeProgressReader, usageOfResult } from './progress.js'
import type { BrokerRoute } from './approvals.js'
import { permissionOptions, type ClaudeCodeRunSpec } from './run-spec.js'
import type { ClaudeChild, ClaudeSession } from './child.js'

export class ClaudeCodeTurn implements RemoteTurn<ClaudeChild> {
  private readonly assistantMessages: AssistantMessage[] = []
  private readonly denials: Denial[] = []
  private readonly progress: ClaudeCodeProgressReader
  private usage: SubagentUsage | undefined
  private initSeen = false
  /** Claude Code's session id, from its init message: a one-shot run's child id is `<provider>:<it>`. */
  private sessionId: string | undefined
  /** Aborted when the turn stops: its permission asks still at the parent's broker are withdrawn. */
  private readonly stopped = new AbortController()

  constructor(
    private readonly message: TextBlock[],
    private readonly turn: TurnControl,
    /** A continuable child's session, created by the first turn Claude Code accepts. */
    private readonly session: ClaudeSession | undefined,
    /** Told why a progress message was dropped. */
    progressDropped: ((reason: string) => void) | undefined,
  ) {
    this.progress = new ClaudeCodeProgressReader(turn, (reason) => progressDropped?.(reason))
  }

  async deliver(child: ClaudeChild): Promise<void> {
    const { turn } = this
    let messages: Query
    // The SDK may spawn inside query(): the spawn hook moves the stage on from here.
    turn.moveTo('spawn')
    try {
      messages = child.start(this.message.map((block) => block.text).join('\n'), this.options(child), () => turn.moveTo('startup'))
    } catch (error) {
      turn.moveTo('query')
      return turn.failStartup(this.startFailed(`the Agent SDK rejected the query: ${errorMessage(error)}`))
    }
    let failure: unknown
    try {
      for await (const message of messages) this.onMessage(message)
    } catch (error) {
      failure = error
    }
    await this.onStreamEnd(child, failure)
  }

  private options(child: ClaudeChild): Options {
    const { spec } = child
    return {
      cwd: spec.cwd,
      env: spec.env,
      pathToClaudeCodeExecutable: spec.executable,
      // A one-shot child leaves no transcript; a continuable one must, to be resumed.
      persistSession: spec.session !== undefined,
      ...(spec.session && (spec.session.resume ? { resume: spec.session.id } : { sessionId: spec.session.id })),
      // A subagent has nobody to answer its questions.
      disallowedTools: ['AskUserQuestion'],
      ...permissionOptions(spec.permissionMode, this.denials, this.brokerRoute(spec)),
      ...(spec.model !== undefined && { model: spec.model }),
      // A helper's MCP servers, started by Claude Code for this turn beside those of its own settings.
      // Sent over stdin, never on the command line, where any user of the machine reads their env and headers.
      ...(spec.mcpServers !== undefined && { mcpServers: spec.mcpServers, mcpServersDelivery: 'initialize' as const }),
      // Text as it streams, for a parent that listens; nobody listening, nobody pays for it.
      ...(this.turn.reporting && { includePartialMessages: true }),
    }
  }

  /** The way to the parent's broker, in `ask` mode with a broker composed and a delegation to name the asks by. */
  private brokerRoute(spec: ClaudeCodeRunSpec): BrokerRoute | undefined {
    const scope = spec.approvalScope
    const broker = spec.permissionMode === 'ask' && scope !== undefined ? spec.approvals?.() : undefined
    if (broker === undefined || scope === undefined) return undefined
    return {
      broker,
      scope,
      // The one child-id format of remote runs; Claude Code asks only after its init message named the session.
      childId: () => scope.childId ?? `${spec.provider}:${this.sessionId ?? '(starting)'}`,
      withdrawn: this.stopped.signal,
    }
  }

  /** The turn settled (completed, cancelled, timed out): nothing it asked about may still be allowed. */
  detach(): void {
    this.stopped.abort()
  }

  private onMessage(message: SDKMessage): void {
    const { turn } = this
    this.progress.read(message)
    switch (message.type) {
      case 'system':
        if (message.subtype === 'init' && !this.initSeen) {
          this.initSeen = true
          this.sessionId = message.session_id
          // Accepted means Claude Code sent its init message: the session exists from here on.
          if (this.session) this.session.created = true
          turn.moveTo('running')
          turn.accepted(message.session_id)
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
          return turn.failStartup(this.startFailed(`Claude Code ended before its init message: ${diagnostic}`))
        }
        this.usage = usageOfResult(message)
        return turn.settle(this.withUsage(resultOf(message, this.assistantMessages, this.denials)))
      }
      default:
        // Progress, status, hooks, tasks, stream events…: none changes the outcome.
        return
    }
  }

  /** The stream ended or broke: after acceptance without a result that is a failure; before it, a start failure. */
  private async onStreamEnd(child: ClaudeChild, failure: unknown): Promise<void> {
    const { turn } = this
    const { claude } = child
    if (turn.settled) return
    // The exit status explains most ends; give the exit event a moment to arrive.
    const exit = claude.exit ?? (await Promise.race([claude.exited(), delay(EXIT_DRAIN_MS)]))
    const cause = failure === undefined ? 'its message stream ended without a result' : errorMessage(failure)
    // The SDK's own message often names the exit already; say it once.
    const exitNote = exit && !cause.includes(exit.signal ?? `code ${exit.code}`) ? describeExit(exit) : ''
    const facts = turn.withStderr([cause, exitNote].filter(Boolean).join('; '))
    if (!this.initSeen) {
      if (!claude.spawned || claude.exit?.spawnError) turn.moveTo('spawn')
      return turn.failStartup(this.startFailed(facts))
    }
    turn.fail(`Claude Code stopped during running: ${facts}`)
  }

  private startFailed(message: string): SubagentError {
    return new SubagentError('START_FAILED', `Claude Code could not be started (stage ${this.turn.stage}): ${message}`)
  }

  result(stopReason: StopReason, diagnostic: string | undefined): SubagentResult {
    return this.withUsage(endingOf(stopReason, diagnostic, this.assistantMessages, this.denials))
  }

  private withUsage(result: SubagentResult): SubagentResult {
    return this.usage ? { ...result, usage: this.usage } : result
  }
}

function delay(ms: number): Promise<undefined> {
  return new Promise((resolve) => setTimeout(() => resolve(undefined), ms).unref())
}
