/**
 * Connecting to a `codex app-server`: the provider's connection file. The process and its
 * wire are `child.ts`; this is the handshake that opens the thread a delegation speaks in:
 *
 *   spawn → `initialize` → `initialized` → `thread/start` (ephemeral for a one-shot run; on
 *   disk under `CODEX_HOME/sessions` for a continuable child) or `thread/resume` (a
 *   continuable child reopened in a new process).
 *
 * A protocol error while starting fails the start; during a turn, the turn (the launch
 * race and the turn lifecycle are `@dsh/subagent`'s). A turn is `turn.ts`.
 */
import { createRequire } from 'node:module'
import { errorMessage, isRecord } from '@dsh/base'
import type { TextBlock } from '@dsh/llm'
import { SubagentError, type RemoteConnection, type RemoteTransport, type StartControl, type TurnControl } from '@dsh/subagent'
import { describeExit } from '@dsh/process'
import { readThreadId } from './app-server-events.js'
import { brokeProtocol, CODEX_CHILD_NAME, CodexChild, codexStartFailed } from './child.js'
import type { ApprovalScope } from './approvals.js'
import type { CodexRunSpec } from './config.js'
import { ConnectionClosedError, ProtocolError, RpcError } from './connection.js'
import type { UsageBaseline } from './turn-reader.js'
import { CodexTurn } from './turn.js'

const CLIENT_VERSION = (createRequire(import.meta.url)('../package.json') as { version: string }).version

/** How the thread is opened: a new one (ephemeral: never written to disk), or one written by an earlier process. */
type ThreadOpening = { kind: 'start'; ephemeral: boolean } | { kind: 'resume'; threadId: string }

/** Up to an open thread: initialize, then start or resume it. */
async function openThread(child: CodexChild, control: StartControl, opening: ThreadOpening): Promise<void> {
  const { connection, spec } = child
  child.starting = control
  try {
    await child.tree.spawned
    control.moveTo('initialize')
    await connection.request('initialize', { clientInfo: { name: 'dsh', title: 'dsh subagent-codex', version: CLIENT_VERSION }, capabilities: { experimentalApi: false, requestAttestation: false } })
    connection.notify('initialized')
    // A helper's MCP servers as config overrides: Codex starts them for this thread as if its config.toml named them.
    const modeFields = { cwd: spec.cwd, approvalPolicy: spec.approvalPolicy, approvalsReviewer: spec.approvalsReviewer, sandbox: spec.sandbox, ...(spec.model !== undefined && { model: spec.model }), ...(spec.mcpConfig !== undefined && { config: spec.mcpConfig }) }
    if (opening.kind === 'start') {
      control.moveTo('thread/start')
      // A continuable child's thread must be on disk for `thread/resume` after a restart.
      child.remoteId = readThreadId(await connection.request('thread/start', { ...modeFields, ephemeral: opening.ephemeral }))
    } else {
      control.moveTo('thread/resume')
      const resumed = readThreadId(await connection.request('thread/resume', { threadId: opening.threadId, ...modeFields, excludeTurns: true }))
      if (resumed !== opening.threadId) throw child.startFailed(`thread/resume answered with thread ${resumed}, not ${opening.threadId}`, control.stage)
      child.remoteId = resumed
    }
    // After the thread opened: a config.toml Codex cannot load is its own error, said at thread/start.
    control.moveTo('account/read')
    await checkLogin(child)
  } catch (error) {
    throw await startFailure(child, error, control.stage)
  } finally {
    child.starting = undefined
  }
}

/**
 * Codex's own login, when its model provider needs one (OpenAI's, Codex's default):
 * without it the turn would wait on a model that never answers, so the start fails in one
 * line saying what to do. A provider of Codex's config.toml with its own key needs none.
 */
async function checkLogin(child: CodexChild): Promise<void> {
  let answer: unknown
  try {
    answer = await child.connection.request('account/read', { refreshToken: false })
  } catch (error) {
    // An app-server without the method: the turn's own errors say the rest.
    if (error instanceof RpcError) return
    throw error
  }
  if (isRecord(answer) && answer.requiresOpenaiAuth === true && answer.account === null) {
    const home = child.spec.env.CODEX_HOME ?? '~/.codex'
    throw new SubagentError('START_FAILED', `${CODEX_CHILD_NAME} has no model to ask: Codex is not logged in (CODEX_HOME ${home}); run \`codex login\` (or \`printenv OPENAI_API_KEY | codex login --with-api-key\`) with that CODEX_HOME, or name a model provider with its own key in its config.toml`)
  }
}

/** A failed start in one line: what refused or broke, and the stage. */
async function startFailure(child: CodexChild, error: unknown, stage: string): Promise<SubagentError> {
  if (error instanceof SubagentError) return error
  const failed = (message: string) => new SubagentError('START_FAILED', message, { cause: error })
  if (error instanceof RpcError) return failed(`${CODEX_CHILD_NAME} refused ${error.method}: ${error.message}`)
  if (error instanceof ProtocolError) return brokeProtocol(error, stage)
  if (error instanceof ConnectionClosedError || child.tree.exit) {
    // Its stdout closed: the exit (code, stderr) says more than the closed pipe.
    const exit = await child.tree.exitWithin(1000)
    return failed(exit ? child.withStderr(`${CODEX_CHILD_NAME} ${describeExit(exit)} during ${stage}`) : `${errorMessage(error)} during ${stage}`)
  }
  if (stage === 'spawn') return failed(`${CODEX_CHILD_NAME} could not be started (stage spawn, ${child.spec.command.command}): ${errorMessage(error)}`)
  return failed(`${CODEX_CHILD_NAME} failed during ${stage}: ${errorMessage(error)}`)
}

/**
 * The Codex wire for `@dsh/subagent`'s remote lifecycle: a one-shot run's (one ephemeral
 * thread) or a continuable conversation's (a thread on disk, resumed each time its
 * app-server is started again).
 */
export class CodexTransport implements RemoteTransport<CodexChild> {
  readonly childName = CODEX_CHILD_NAME
  readonly interruptName = 'turn/interrupt'
  readonly cancelGraceKey = 'graceMs'
  readonly startupTimeoutKey = 'startupTimeoutMs'
  readonly initialStage = 'spawn'
  readonly turnStage = 'turn/start'
  /** The thread's last usage total, across its turns (Codex re-sends it at the next turn's start). */
  private readonly usageBaseline: UsageBaseline = {}

  constructor(
    /** The spec of the child's turns (cwd, environment, permissions, model, limits). */
    readonly spec: CodexRunSpec,
    /** How the next connection opens its thread. */
    private opening: ThreadOpening,
    /** Whose side effects Codex's approvals are, for the parent's broker. */
    private readonly approvals?: ApprovalScope,
  ) {}

  get provider(): string {
    return this.spec.provider
  }

  get startupTimeoutMs(): number {
    return this.spec.startupTimeoutMs
  }

  get cancelGraceMs(): number {
    return this.spec.graceMs
  }

  get timeoutMs(): number | undefined {
    return this.spec.timeoutMs
  }

  get conversationName(): string {
    return `Codex thread ${this.opening.kind === 'resume' ? this.opening.threadId : '(new)'}`
  }

  storedAt(): string {
    return this.opening.kind === 'start' && this.opening.ephemeral ? 'nowhere: an ephemeral Codex thread' : 'Codex\'s own thread store (CODEX_HOME)'
  }

  /** From now on a connection resumes `threadId` (the conversation's thread, once it exists). */
  resumeWith(threadId: string): void {
    this.opening = { kind: 'resume', threadId }
  }

  connect(control: StartControl): RemoteConnection<CodexChild> {
    const child = new CodexChild(this.spec, this.approvals)
    return { child, opened: openThread(child, control, this.opening) }
  }

  openTurn(message: TextBlock[], control: TurnControl): CodexTurn {
    return new CodexTurn(this.spec, message, control, this.usageBaseline)
  }

  startFailed(message: string, stage: string): SubagentError {
    return codexStartFailed(message, stage)
  }
}
