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
 * Why a turn ended; durable in session logs. `refusal` is the model declining (a
 * content filter); older logs spell it `blocked`, which readers accept as `refusal`.
 */
export type TurnEndReason = 'completed' | 'aborted' | 'error' | 'max-tokens' | 'refusal'

/** Why a delegated run ended: what `SubagentResult.stopReason` says. */
export type StopReason = 'completed' | 'aborted' | 'error' | 'max-tokens' | 'refusal'

/** A background task's state. */
export type TaskStatus = 'running' | 'completed' | 'failed' | 'killed'

/** A node of the live progress tree. */
export type ProgressState = 'running' | 'done' | 'failed' | 'cancelled'

/** ACP's `session/prompt` stop reasons (protocol version 1). */
export type AcpStopReason = 'end_turn' | 'max_tokens' | 'max_turn_requests' | 'refusal' | 'cancelled'

export const TURN_END_REASONS: readonly TurnEndReason[] = ['completed', 'aborted', 'error', 'max-tokens', 'refusal']
export const STOP_REASONS: readonly StopReason[] = ['completed', 'aborted', 'error', 'max-tokens', 'refusal']
export const FINISH_REASONS: readonly FinishReason[] = ['stop', 'tool-calls', 'length', 'content-filter']

/** A durable turn reason as read from a file: the pre-`refusal` spelling included. */
export function parseTurnEndReason(value: unknown): TurnEndReason | undefined {
  if (value === 'blocked') return 'refusal'
  return (TURN_END_REASONS as readonly unknown[]).includes(value) ? (value as TurnEndReason) : undefined
}

/**
 * The turn ending a model finish forces, or `undefined` when the turn goes on (the
 * loop decides between more steps and `completed`). A truncated response (`length`)
 * ends `max-tokens`; a filtered one ends `refusal`.
 */
export function turnEndOfFinish(finish: FinishReason): TurnEndReason | undefined {
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

/** A child's turn ending as the run's stop reason. */
export function stopReasonOfTurn(reason: TurnEndReason): StopReason {
  switch (reason) {
    case 'completed':
    case 'aborted':
    case 'error':
    case 'max-tokens':
    case 'refusal':
      return reason
    default:
      return assertNever(reason, 'turn end reason')
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
export function acpStopReasonOfTurn(reason: TurnEndReason, cancelRequested: boolean): AcpStopReason | 'error' {
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
    default:
      return assertNever(reason, 'turn end reason')
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
      return 'failed'
    default:
      return assertNever(reason, 'stop reason')
  }
}

/** A turn ending as a node of the live tree (the root is a turn, not a run). */
export function progressStateOfTurn(reason: TurnEndReason): ProgressState {
  return progressStateOfStop(stopReasonOfTurn(reason))
}
