import { randomUUID } from 'node:crypto'
import { Role, TaskState, type Message, type Part } from '@a2a-js/sdk'
import { AgentEvent, type AgentExecutionEvent } from '@a2a-js/sdk/server'
import { assertNever, type StopReason } from '@dsh/base'
import type { ReportedDescendant } from '@dsh/subagent'

/**
 * The one artifact of a task: assistant text streams into it as appends while it is
 * written, and its last chunk leaves the final answer (the output-selection rule's choice)
 * as its whole content. The `@dsh/subagent-a2a` client reads it first.
 */
export const ANSWER_ARTIFACT = 'answer'

export function textPart(value: string): Part {
  return { content: { $case: 'text', value }, metadata: undefined, filename: '', mediaType: 'text/plain' }
}

export function agentMessage(taskId: string, contextId: string, value: string | Part[]): Message {
  return { messageId: randomUUID(), contextId, taskId, role: Role.ROLE_AGENT, parts: typeof value === 'string' ? [textPart(value)] : value, metadata: undefined, extensions: [], referenceTaskIds: [] }
}

/** A state as the protocol names it in prose: `input_required`, `working`. */
export function stateName(state: TaskState): string {
  return (TaskState[state] ?? String(state)).replace(/^TASK_STATE_/, '').toLowerCase()
}

/** The text a message carries; other part kinds are named so the agent knows something was left out. */
export function textOfMessage(message: Message): string {
  return message.parts
    .map((part) => {
      const content = part.content
      if (!content) return ''
      switch (content.$case) {
        case 'text':
          return content.value
        case 'url':
          return `[${part.filename || 'file'}](${content.value})`
        case 'data':
          return JSON.stringify(content.value)
        case 'raw':
          return `[binary part ${part.filename || ''} (${part.mediaType || 'unknown type'}) left out: only text is supported]`
        default:
          return assertNever(content, 'A2A part')
      }
    })
    .join('\n')
}

export function statusEvent(taskId: string, contextId: string, state: TaskState, note?: string | Part[], dsh?: DshStatusMetadata): AgentExecutionEvent {
  return AgentEvent.statusUpdate({
    taskId,
    contextId,
    status: { state, message: note === undefined ? undefined : agentMessage(taskId, contextId, note), timestamp: new Date().toISOString() },
    metadata: dsh === undefined ? undefined : { dsh },
  })
}

/** A token count, as `metadata.dsh.usage` carries it (the `SubagentUsage` shape of `@dsh/subagent`). */
export interface DshUsage {
  inputTokens: number
  outputTokens: number
  cachedInputTokens: number
}

/**
 * What a dsh worker adds to a status update's `metadata.dsh` for a dsh client:
 * `progress`, structured progress updates (the `SubagentProgress` union of `@dsh/subagent`:
 * `tool-start`, `tool-end`, `usage`) so the client need not parse status text; `usage`, on
 * the final status, the task's token usage; `descendants`, each start and end of an agent
 * below the task (`@dsh/subagent`'s `ReportedDescendant`: its id, helper and delegation path
 * from the task's agent), so a dsh parent's hooks fire `SubagentStart`/`SubagentStop` for it.
 */
export interface DshStatusMetadata {
  progress?: DshProgress[]
  usage?: DshUsage
  descendants?: ReportedDescendant[]
}

export type DshProgress =
  | { kind: 'tool-start'; callId: string; name: string; args?: string }
  | { kind: 'tool-end'; callId: string; name: string; ok: boolean; detail?: string }
  | { kind: 'usage'; usage: DshUsage }

/** Longest tool-argument text sent in `metadata.dsh.progress` (the client shortens it further for display). */
export const MAX_PROGRESS_ARGS_CHARS = 400

/** A tool call's arguments as bounded one-line text: the wire carries a preview, never the whole input. */
export function argsPreview(args: unknown): string {
  let json: string
  try {
    json = typeof args === 'string' ? args : (JSON.stringify(args) ?? '')
  } catch {
    // Arguments that cannot be serialised (a cycle, a BigInt) are shown as their kind only.
    json = `[${typeof args}]`
  }
  return json.length > MAX_PROGRESS_ARGS_CHARS ? `${json.slice(0, MAX_PROGRESS_ARGS_CHARS - 1)}…` : json
}

/**
 * A status update that repeats the task's current state with no message, sent every
 * `KEEPALIVE_INTERVAL_MS` while a task waits or works, so a client can tell a worker
 * that went silent (link down, process stopped) from one that is busy. Marked in its
 * metadata so it can be told apart from a real change.
 */
export function keepAliveEvent(taskId: string, contextId: string, state: TaskState): AgentExecutionEvent {
  return AgentEvent.statusUpdate({
    taskId,
    contextId,
    status: { state, message: undefined, timestamp: new Date().toISOString() },
    metadata: { dsh: { keepAlive: true } },
  })
}

export function artifactEvent(taskId: string, contextId: string, artifactId: string, value: string, append: boolean, lastChunk: boolean): AgentExecutionEvent {
  return AgentEvent.artifactUpdate({
    taskId,
    contextId,
    artifact: { artifactId, name: artifactId, description: '', parts: [textPart(value)], metadata: undefined, extensions: [] },
    append,
    lastChunk,
    metadata: undefined,
  })
}

/** How a dsh run ends its task. */
export function taskStateOfStop(reason: StopReason): TaskState {
  switch (reason) {
    case 'completed':
      return TaskState.TASK_STATE_COMPLETED
    case 'aborted':
      return TaskState.TASK_STATE_CANCELED
    case 'error':
    case 'max-tokens':
    case 'refusal':
    case 'budget':
      return TaskState.TASK_STATE_FAILED
    default:
      return assertNever(reason, 'stop reason')
  }
}
