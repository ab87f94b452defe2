import type { Context } from 'cordis'
import type { UserMessage } from '@dsh/llm'
import type { Session, SessionInit, StopReason } from '@dsh/session'

export type AgentStatus = 'idle' | 'running' | 'disposing' | 'disposed'

/** Per-agent choices; anything unset falls back to the agents service's config. */
export interface AgentOptions {
  /** Model spec `adapter:model`; default: `ctx.llm`'s configured model. */
  model?: string
  /** Replaces the deployment persona (the head of the system prompt) for this agent. */
  persona?: string
  /** Most steps one turn may take before it ends with `error`. */
  maxSteps?: number
}

export interface TurnResult {
  turn: number
  reason: StopReason
  error?: string
  /** Seq of this turn's `turn/start` and `turn/end` events. */
  startSeq: number
  endSeq: number
}

/** The live handle of one agent. Its id is its session's id. */
export interface Agent {
  readonly id: string
  readonly session: Session
  readonly status: AgentStatus
  /** 0 for a root agent; a child's is its parent's plus one. */
  readonly depth: number
  readonly options: Readonly<AgentOptions>
  /** The delegating agent, for an in-process child. */
  readonly parent?: Agent
  /** The root of its in-process tree: the agent itself when it has no parent. Known from creation. */
  readonly root: Agent
  /** The agents above it, nearest first: its parent, that one's parent, … its root. Nothing for a root. */
  ancestors(): IterableIterator<Agent>
  /**
   * A context scoped to this agent: tools registered through it exist only for this
   * agent, and everything registered through it is undone when the agent is disposed.
   * Created on first access.
   */
  readonly ctx: Context
  /** Queue a new turn for `message`; resolves when that turn ends (never rejects for a turn failure). */
  followup(message: UserMessage | string): Promise<TurnResult>
  /** Input for the next step of the running turn; wakes an idle agent with a new turn. */
  steer(message: UserMessage | string): void
  /** Input for the next step, without waking an idle agent. */
  inject(message: UserMessage | string): void
  /**
   * Add a source of input: it is polled at every step boundary of this agent's turns
   * (`'step'`: what it returns joins that step's input) and, when the agent could start
   * a turn (`'wake'`: after a turn that was not aborted, or on `wake()` while idle),
   * what it returns then starts a new turn. Returns the disposer. A source that throws
   * gives nothing (logged).
   */
  addInputSource(source: InputSource): () => void
  /** Ask an idle agent to poll its input sources now; a no-op while a turn runs (its steps poll them). */
  wake(): void
  /**
   * Record a cancellation that found no turn running (its work was background work, or it
   * came after the last turn ended): queues a turn that runs no step and ends `aborted`
   * with `why`, so the session's last word is the cancel. Resolves with that turn.
   */
  recordAbort(why: string): Promise<TurnResult>
  /** Abort the running turn (it ends `aborted`). */
  cancel(cause?: unknown): void
  /** Resolves once no turn is running or queued. */
  whenIdle(): Promise<void>
  /** Cancel, run cleanups, release the context and session. Idempotent. */
  dispose(): Promise<void>
}

export interface CreateAgentOptions {
  /** Resume this session (live or stored) instead of creating one. */
  sessionId?: string
  /** Share the first `length` events of `session` as the new session's history (fork). */
  seed?: { session: Session; length: number }
  /** Header fields of a new session (`id`: a reserved id, which must not be live). */
  meta?: Omit<SessionInit, 'seed'>
  agentOptions?: AgentOptions
  parent?: Agent
  /**
   * Runs before the agent is visible in `ctx.agents` (register scoped tools, restrict
   * tools). If it throws, everything created so far is rolled back.
   */
  setup?(ctx: Context, agent: Agent): void | Promise<void>
  /** Aborting it before `create` resolves rolls the agent back. */
  signal?: AbortSignal
}

/** What a turn driver gets to run one turn of an agent. */
export interface TurnRuntime {
  readonly agent: Agent
  readonly system: string
  readonly maxSteps: number
  nextTurnNumber(): number
  /** At a step boundary: every steered or injected message, then what the input sources give. */
  claimInput(): UserMessage[]
  /** Whether steered or injected input waits (the turn then takes another step). */
  hasInbox(): boolean
  /**
   * Called by the driver right before it logs `turn/end`: from then on the agent reads
   * `idle`, so a `turn/end` listener sees the turn as over.
   */
  endingTurn(): void
}

/** Where an input source is polled: at a step boundary, or when a new turn could start. */
export type InputBoundary = 'step' | 'wake'

/** See `Agent.addInputSource`. Returns the messages to add now (often none). */
export type InputSource = (boundary: InputBoundary) => readonly UserMessage[]

/** Runs turns. `@dsh/agent-loop` provides the default one as `ctx.agentLoop`. */
export interface TurnDriver {
  /**
   * Once the turn has begun (its `turn/start` logged), any failure ends it `error` and the
   * promise resolves with that result; it rejects only when the session is already
   * released as the turn begins, so nothing of the turn can be logged.
   */
  runTurn(runtime: TurnRuntime, input: UserMessage[], signal: AbortSignal): Promise<TurnResult>
}

/** Run during every agent's disposal, awaited: owned background work drains here. */
export type AgentCleanup = (agent: Agent) => Promise<void> | void

/** Run for every agent that resumes a session (see `AgentRegistry.onResume`). */
export type AgentResumeListener = (agent: Agent) => void
