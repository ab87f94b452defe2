/**
 * Connecting to an ACP agent: the provider's connection file, the `RemoteTransport` that
 * `@dsh/subagent`'s one remote lifecycle drives. Each connection is a new agent process
 * (`child.ts`: spawn, `initialize`, `session/new` or `session/load`); each turn is
 * `turn.ts`. A one-shot run and a continuable conversation connect the same way; a
 * continuable child also requires `loadSession`, since it must be reopenable after a
 * restart. Imports form a line: child ← turn ← connection ← plugin.
 */
import type { LoadSessionRequest } from '@agentclientprotocol/sdk'
import type { TextBlock } from '@dsh/llm'
import { SubagentError, type RemoteConnection, type RemoteTransport, type StartControl, type TurnControl } from '@dsh/subagent'
import type { AcpRunSpec } from './config.js'
import type { ApprovalScope } from './permission.js'
import { refuseOversizedPrompt } from './frame-limit.js'
import { AcpChild, ACP_CHILD_NAME, acpStartFailed, type SessionOpening } from './child.js'
import { AcpTurn } from './turn.js'

/**
 * The ACP wire for `@dsh/subagent`'s remote lifecycle: a one-shot run's (`opening` a new
 * session) or a continuable conversation's (a new session first, then `session/load` each
 * time its agent is started again).
 */
export class AcpTransport implements RemoteTransport<AcpChild> {
  readonly childName = ACP_CHILD_NAME
  readonly interruptName = 'session/cancel'
  readonly cancelGraceKey = 'cancelGraceMs'
  readonly startupTimeoutKey = 'startupTimeoutMs'
  readonly initialStage = 'spawn'
  readonly turnStage = 'session/prompt'

  constructor(
    private readonly spec: AcpRunSpec,
    private readonly cwd: string,
    /** How the next connection opens its session. */
    private opening: SessionOpening,
    /** Whose side effects the agent asks about (see `AcpChild`). */
    private readonly approvals?: ApprovalScope,
  ) {}

  get provider(): string {
    return this.spec.provider
  }

  get startupTimeoutMs(): number {
    return this.spec.startupTimeoutMs
  }

  get cancelGraceMs(): number {
    return this.spec.cancelGraceMs
  }

  get timeoutMs(): number | undefined {
    return this.spec.timeoutMs
  }

  get conversationName(): string {
    return `ACP session ${this.opening.kind === 'load' ? this.opening.request.sessionId : '(new)'}`
  }

  storedAt(): string {
    // A dsh acp child stores its session beside its parent's (DSH_SESSION_DIR) unless its
    // own --session-dir says otherwise; any other agent keeps its own.
    return `the ACP agent's own store (${[this.spec.command, ...this.spec.args].join(' ')})`
  }

  /** From now on a connection reopens `sessionId` (the conversation's session, once it exists) with `request`, and the same MCP servers. */
  reopenWith(request: LoadSessionRequest): void {
    this.opening = { kind: 'load', request, ...(this.opening.servers && { servers: this.opening.servers }) }
  }

  connect(control: StartControl): RemoteConnection<AcpChild> {
    const child = new AcpChild(this.spec, this.cwd, this.approvals)
    return { child, opened: child.open(control, this.opening) }
  }

  refuse(message: TextBlock[]): string | undefined {
    try {
      refuseOversizedPrompt(this.spec.provider, message, this.spec.maxFrameBytes)
      return undefined
    } catch (error) {
      if (error instanceof SubagentError) return error.message
      throw error
    }
  }

  openTurn(message: TextBlock[], control: TurnControl): AcpTurn {
    return new AcpTurn(this.spec, message, control)
  }

  startFailed(message: string, stage: string): SubagentError {
    return acpStartFailed(this.spec, message, stage)
  }
}
