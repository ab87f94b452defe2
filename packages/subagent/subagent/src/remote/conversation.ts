/**
 * A conversation with a remote child: turns one at a time over one child, started again
 * when it is gone (it crashed, a turn timed out or ignored its interrupt, or a new dsh
 * process resumes a record). A continuable child's `RemoteConversation` is one; a one-shot
 * run is a conversation of one turn (`one-shot.ts`). A provider supplies its transport:
 * how to connect (its connection file) and what a turn says (its turn file).
 */
import type { TextBlock } from '@dsh/llm'
import { SubagentError } from '../errors.js'
import type { ProgressSink, SubagentResult } from '../types.js'
import type { RemoteConversation } from '../continuable/types.js'
import { launchRemoteChild, StartupWindow, type LaunchedChild, type Launcher } from './launch.js'
import { TurnRun, type ChildHold, type RemoteTurn, type TurnChild, type TurnControl, type TurnWords } from './turn.js'

/** A remote child as the lifecycle holds it: made by a provider's connection file. */
export interface RemoteChild extends LaunchedChild, TurnChild {
  /** The remote side's id of what the child opened (an ACP session, a Codex thread), when it has one. */
  readonly remoteId?: string
  /** Whether the process is still there and its wire sound (a zombie, a broken protocol, do not count). */
  running(): Promise<boolean>
}

/** One remote provider's wire, in one mode (a one-shot run's, a continuable conversation's). */
export interface RemoteTransport<Child extends RemoteChild> extends TurnWords, Launcher<Child> {
  /** The provider's registered name: a one-shot run's child id is `<provider>:<remote id>`. */
  readonly provider: string
  /** Where a turn starts (`session/prompt`, `turn/start`). */
  readonly turnStage: string
  /** How messages name the conversation: "ACP session <id>", "Codex thread <id>". */
  readonly conversationName: string
  /**
   * Each turn starts a process of its own (Claude Code: a query per message), so a turn
   * is inside a start-up window until it is accepted, as a one-shot run's start is.
   */
  readonly startsPerTurn?: boolean
  /** Why `message` cannot be sent at all (checked before any child is touched), or `undefined`. */
  refuse?(message: TextBlock[]): string | undefined
  /** Where the child keeps its own record (`SubagentRun.storedAt`), once it is open. */
  storedAt?(child: Child): string | undefined
  /** One turn's wire: the provider's turn file. */
  openTurn(message: TextBlock[], control: TurnControl): RemoteTurn<Child>
}

/** The conversation side of a `RemoteConversation`: send, cancel and dispose over one transport. */
export class ConversationCore<Child extends RemoteChild> {
  private child: Child | undefined
  private turn: TurnRun<Child> | undefined
  private disposal: Promise<void> | undefined
  /** Children stopped because they could not be trusted with another turn: disposal waits for them. */
  private readonly stopping = new Set<Promise<void>>()

  constructor(
    private readonly transport: RemoteTransport<Child>,
    child: Child | undefined,
  ) {
    this.child = child
  }

  get pid(): number | undefined {
    return this.child?.process?.pid
  }

  /** Start the child and reopen the conversation now (a resume), rather than at the next message. */
  async reconnect(signal: AbortSignal): Promise<void> {
    this.child = await this.launch(signal)
  }

  send(message: TextBlock[], progress?: ProgressSink): Promise<SubagentResult> {
    const { conversationName } = this.transport
    if (this.disposal) return Promise.resolve({ output: [], stopReason: 'error', diagnostic: `the conversation with ${conversationName} was closed; it takes no more messages` })
    if (this.turn) return Promise.reject(new SubagentError('INVALID_REQUEST', `a turn of ${conversationName} is still running; send the next message after it settles`))
    const turn = this.newTurn('turn', progress)
    void this.run(turn, message)
    return turn.done
  }

  /**
   * The one turn of a one-shot run, on the child it launched, inside its start-up window:
   * the caller races `turn.acceptance` through the window, then `begin`s the turn (or
   * abandons its start).
   */
  first(message: TextBlock[], progress: ProgressSink | undefined, window: StartupWindow, startedAt: number): TurnRun<Child> {
    const turn = this.newTurn('run', progress, startedAt)
    turn.open(this.transport.openTurn(message, turn))
    turn.deliver(this.child!, window)
    return turn
  }

  cancel(reason?: unknown): void {
    this.turn?.cancel(reason)
  }

  dispose(): Promise<void> {
    this.disposal ??= (async () => {
      const turn = this.turn
      turn?.cancel('the conversation was closed')
      await turn?.done
      const child = this.child
      this.child = undefined
      await Promise.all([child?.close(), ...this.stopping])
    })()
    return this.disposal
  }

  private newTurn(scope: 'run' | 'turn', progress: ProgressSink | undefined, startedAt?: number): TurnRun<Child> {
    const turn = new TurnRun(this.transport, this.hold, progress, scope, this.transport.turnStage, startedAt)
    this.turn = turn
    void turn.done.then(() => {
      if (this.turn === turn) this.turn = undefined
    })
    return turn
  }

  private async run(turn: TurnRun<Child>, message: TextBlock[]): Promise<void> {
    const { transport } = this
    // A message the child would refuse is not sent: the turn ends error, the child untouched.
    const refusal = transport.refuse?.(message)
    if (refusal !== undefined) return turn.end('error', refusal)
    turn.open(transport.openTurn(message, turn))
    const restarting = `the turn was cancelled while ${transport.childName} was starting again`
    let child = this.child
    if (!child || !(await child.running())) {
      if (child) void this.hold.abandon(child)
      try {
        child = await this.launch(turn.startupSignal)
      } catch (error) {
        if (turn.cancelledEarly) return turn.end('aborted', restarting)
        return turn.end('error', this.notRestarted(error))
      }
      if (this.disposal || turn.cancelledEarly) {
        await child.close().catch(() => {
          // Reaping failed; nothing more can be done for a process nobody used.
        })
        return turn.end('aborted', restarting)
      }
      this.child = child
    }
    // Cancelled while the child was being checked: nothing was sent, so nothing needs stopping.
    if (turn.cancelledEarly) return turn.end('aborted', 'the turn was cancelled')
    if (!transport.startsPerTurn) return turn.deliver(child)
    // A turn that starts a process has its start-up, raced like a launch.
    const window = new StartupWindow(transport, turn.startupSignal, transport.turnStage, transport.timeoutMs === undefined ? undefined : { ms: transport.timeoutMs, key: 'timeoutMs' })
    window.watch(child.process)
    turn.deliver(child, window)
    try {
      await window.race(turn.acceptance)
    } catch (error) {
      window.close(false)
      if (turn.cancelledEarly) turn.abandonStart('aborted', restarting)
      else turn.abandonStart('error', this.notRestarted(error))
      void this.hold.abandon(child)
      return
    }
    turn.begin()
  }

  private launch(signal: AbortSignal): Promise<Child> {
    return launchRemoteChild(this.transport, signal)
  }

  private notRestarted(error: unknown): string {
    const { childName, conversationName } = this.transport
    return `${childName} could not be started again to continue ${conversationName}: ${error instanceof Error ? error.message : String(error)}`
  }

  /** What a turn may do with the conversation's child. */
  private readonly hold: ChildHold<Child> = {
    abandon: (child) => {
      if (this.child === child) this.child = undefined
      const closing = child.close()
      this.stopping.add(closing)
      closing.then(
        () => this.stopping.delete(closing),
        () => {
          // It outlived SIGKILL: disposal reports it (it awaits `stopping`); nothing to retry here.
        },
      )
      return closing
    },
  }
}

/** A continuable child's conversation: the core, with the identity its parent-side record keeps. */
class ContinuableConversation<Child extends RemoteChild> extends ConversationCore<Child> implements RemoteConversation {
  constructor(
    transport: RemoteTransport<Child>,
    child: Child | undefined,
    readonly remoteId: string,
    readonly resumeData: Readonly<Record<string, unknown>> | undefined,
  ) {
    super(transport, child)
  }
}

/**
 * The `RemoteConversation` a remote provider's `prepareContinuable` returns (with the child
 * it launched) or `resumeContinuable` reconnects (`child` undefined, then `reconnect`).
 */
export function openConversation<Child extends RemoteChild>(
  transport: RemoteTransport<Child>,
  child: Child | undefined,
  remoteId: string,
  resumeData?: Readonly<Record<string, unknown>>,
): RemoteConversation & { reconnect(signal: AbortSignal): Promise<void> } {
  return new ContinuableConversation(transport, child, remoteId, resumeData)
}
