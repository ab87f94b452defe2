/**
 * How things end, in one vocabulary. Every layer that reports an ending (the model's
 * finish, a turn, a delegated run, a background task, the live tree, ACP's answer to a
 * prompt) names it with a union from this file, and every translation between two of
 * them is a function here. A new reason is added once, and each switch below that fails
 * to compile is a decision to make, not a silent default.
 */
import { assertNever } from './guards.js'

/** Why the model stopped one response (adapters normalise their wire's spelling to this). */
export type FinishReason = 'stop' | 'tool-calls' | 'length' | 'content-filter'

/**
 * How a turn ended, and so how the run it was (a delegated child's) stopped: one union for
 * both, durable in session logs (`turn/end.reason`) and in `SubagentResult.stopReason`.
 * `refusal` is the model declining (a content filter); older logs spell it `blocked`,
 * which readers accept as `refusal`. `budget` is a child stopped because a budget of its
 * own or of its tree was spent (tokens, cost, children, wall time): its diagnostic, or
 * its `turn/end` error, says which one and what was used.
 */
export type StopReason = 'completed' | 'aborted' | 'error' | 'max-tokens' | 'refusal' | 'budget'

/** A background task's state. */
export type TaskStatus = 'running' | 'completed' | 'failed' | 'killed'

/** A node of the live progress tree. */
export type ProgressState = 'running' | 'done' | 'failed' | 'cancelled'

/** ACP's `session/prompt` stop reasons (protocol version 1). */
export type AcpStopReason = 'end_turn' | 'max_tokens' | 'max_turn_requests' | 'refusal' | 'cancelled'

export const STOP_REASONS: readonly StopReason[] = ['completed', 'aborted', 'error', 'max-tokens', 'refusal', 'budget']

/**
 * Why a run is stopped, when the one stopping it knows better than "cancelled": the reason
 * of the abort that stops a turn (`controller.abort(new StopRequest('budget', why))`),
 * which the turn then ends with, `why` as its error. Any other abort ends `aborted`.
 */
export class StopRequest extends Error {
  constructor(
    readonly stopReason: Exclude<StopReason, 'completed'>,
    message: string,
  ) {
    super(message)
    this.name = 'StopRequest'
  }
}
export const FINISH_REASONS: readonly FinishReason[] = ['stop', 'tool-calls', 'length', 'content-filter']

/** A stop reason as read from a file or a peer: the pre-`refusal` spelling included. */
export function parseStopReason(value: unknown): StopReason | undefined {
  if (value === 'blocked') return 'refusal'
  return (STOP_REASONS as readonly unknown[]).includes(value) ? (value as StopReason) : undefined
}

/**
 * The turn ending a model finish forces, or `undefined` when the turn goes on (the
 * loop decides between more steps and `completed`). A truncated response (`length`)
 * ends `max-tokens`; a filtered one ends `refusal`.
 */
export function stopReasonOfFinish(finish: FinishReason): StopReason | undefined {
  switch (finish) {
    case 'stop':
    case 'tool-calls':
      return undefined
    case 'length':
      return 'max-tokens'
    case 'content-filter':
      return 'refusal'
    default:
      return assertNever(finish, 'finish reason')
  }
}

/**
 * ACP's stop reason as the seam's. `max_turn_requests` (and anything a newer agent
 * might send) is a failure: consumers treat only `completed` as an answer.
 */
export function stopReasonOfAcp(acp: string): StopReason {
  switch (acp as AcpStopReason) {
    case 'end_turn':
      return 'completed'
    case 'max_tokens':
      return 'max-tokens'
    case 'refusal':
      return 'refusal'
    case 'cancelled':
      return 'aborted'
    case 'max_turn_requests':
      return 'error'
    default:
      return 'error'
  }
}

/**
 * A turn's ending as ACP's answer to `session/prompt`, or `'error'` when ACP has no
 * stop reason for it (the server answers with a JSON-RPC error instead). A prompt the
 * client cancelled answers `cancelled` whatever the turn managed (ACP requires it).
 */
export function acpStopReasonOfStop(reason: StopReason, cancelRequested: boolean): AcpStopReason | 'error' {
  if (cancelRequested) return 'cancelled'
  switch (reason) {
    case 'completed':
      return 'end_turn'
    case 'aborted':
      return 'cancelled'
    case 'max-tokens':
      return 'max_tokens'
    case 'refusal':
      return 'refusal'
    case 'error':
      return 'error'
    case 'budget':
      // ACP's word for a turn stopped at a limit of the agent's own.
      return 'max_turn_requests'
    default:
      return assertNever(reason, 'stop reason')
  }
}

/**
 * A finished delegated run as a task status: `aborted` is a kill (the only thing that
 * aborts a background run is its task being stopped); every other failure is `failed`.
 */
export function taskStatusOfStop(reason: StopReason): Exclude<TaskStatus, 'running'> {
  switch (reason) {
    case 'completed':
      return 'completed'
    case 'aborted':
      return 'killed'
    case 'error':
    case 'max-tokens':
    case 'refusal':
    case 'budget':
      return 'failed'
    default:
      return assertNever(reason, 'stop reason')
  }
}

/** A stop reason as a node of the live tree. */
export function progressStateOfStop(reason: StopReason): ProgressState {
  switch (reason) {
    case 'completed':
      return 'done'
    case 'aborted':
      return 'cancelled'
    case 'error':
    case 'max-tokens':
    case 'refusal':
    case 'budget':
      return 'failed'
    default:
      return assertNever(reason, 'stop reason')
  }
}
