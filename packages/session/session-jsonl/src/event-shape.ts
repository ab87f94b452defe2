/**
 * The shape of each event type, checked when a file is read back: the type's top-level
 * fields and every content block of its messages, deep enough that nothing downstream
 * (the store restoring it, the model request built from it, `dsh sessions show`) meets a
 * value it cannot handle. Extra fields are allowed; they are data, not structure.
 */
import { assertNever, FINISH_REASONS, isRecord } from '@dsh/base'
import { INPUT_KINDS, PERMISSION_SOURCES, TOOL_PERMISSION_DECISIONS, type SessionEventType } from '@dsh/session'
import { parseStopReason } from '@dsh/base'

type Json = Record<string, unknown>

/** What is wrong with the body of an event of `type`, or `undefined` when nothing is. */
export function eventBodyProblem(type: SessionEventType, event: Json): string | undefined {
  switch (type) {
    case 'turn/start':
      return countField(event, 'turn')
    case 'step/start':
    case 'step/end':
      return countField(event, 'step')
    case 'user/message':
      return messageProblem(event.message, 'user')
    case 'assistant/message':
      return (
        messageProblem(event.message, 'assistant') ??
        (event.finish !== undefined && !(FINISH_REASONS as readonly unknown[]).includes(event.finish) ? `unknown finish ${quoted(event.finish)}` : undefined) ??
        usageProblem(event.usage)
      )
    case 'tool/call':
      return prefixed('"call"', toolCallProblem(event.call))
    case 'tool/result':
      return (
        prefixed('"result"', toolResultProblem(event.result)) ??
        prefixed('"permission"', permissionProblem(event.permission)) ??
        (event.record === undefined || (typeof event.record === 'object' && event.record !== null && !Array.isArray(event.record)) ? undefined : '"record" must be an object')
      )
    case 'turn/end':
      return (
        countField(event, 'turn') ??
        (parseStopReason(event.reason) !== undefined ? undefined : `unknown reason ${quoted(event.reason)}`) ??
        (event.error !== undefined && typeof event.error !== 'string' ? '"error" must be a string' : undefined)
      )
    case 'input/queued':
      return (
        (typeof event.id === 'string' && event.id !== '' ? undefined : '"id" must be a non-empty string') ??
        ((INPUT_KINDS as readonly unknown[]).includes(event.as) ? undefined : `unknown "as" ${quoted(event.as)}`) ??
        messageProblem(event.message, 'user')
      )
    case 'input/taken':
      return (
        (Array.isArray(event.ids) && event.ids.every((id) => typeof id === 'string') ? undefined : '"ids" must be a list of strings') ??
        (event.dropped !== undefined && typeof event.dropped !== 'string' ? '"dropped" must be a string' : undefined)
      )
    case 'approval':
      return prefixed('"request"', approvalRequestProblem(event.request)) ?? (event.permission === undefined ? '"permission" is missing' : prefixed('"permission"', permissionProblem(event.permission)))
    case 'hook/run':
      return typeof event.event !== 'string' || typeof event.command !== 'string' ? 'needs a string "event" and "command"' : typeof event.durationMs !== 'number' || event.durationMs < 0 ? '"durationMs" must be a non-negative number' : event.decision !== undefined && event.decision !== 'block' && event.decision !== 'ask' && event.decision !== 'allow' ? `unknown decision ${quoted(event.decision)}` : undefined
    default:
      return assertNever(type, 'session event type')
  }
}

/** Which block types a message of each role may hold. */
const BLOCKS_OF_ROLE = {
  user: ['text', 'tool-result'],
  assistant: ['text', 'reasoning', 'tool-call'],
} as const

function messageProblem(message: unknown, role: keyof typeof BLOCKS_OF_ROLE): string | undefined {
  if (!isRecord(message) || message.role !== role || !Array.isArray(message.content)) return `"message" must be a ${role} message with a content array`
  const allowed: readonly string[] = BLOCKS_OF_ROLE[role]
  for (const [index, block] of message.content.entries()) {
    const where = `message.content[${index}]`
    if (!isRecord(block) || typeof block.type !== 'string' || !allowed.includes(block.type)) {
      return `${where} must be a block of type ${allowed.map((type) => `"${type}"`).join(' or ')}`
    }
    const problem = block.type === 'tool-call' ? toolCallProblem(block) : block.type === 'tool-result' ? toolResultProblem(block) : textProblem(block)
    if (problem) return `${where}: ${problem}`
  }
  return undefined
}

function textProblem(block: Json): string | undefined {
  return typeof block.text === 'string' ? undefined : `a ${block.type} block needs a string "text"`
}

function toolCallProblem(block: unknown): string | undefined {
  if (!isRecord(block) || block.type !== 'tool-call') return 'must be a tool-call block'
  return stringFields(block, ['id', 'name']) ?? (block.rawArgs !== undefined && typeof block.rawArgs !== 'string' ? '"rawArgs" must be a string' : undefined)
}

function toolResultProblem(block: unknown): string | undefined {
  if (!isRecord(block) || block.type !== 'tool-result') return 'must be a tool-result block'
  const content = block.content
  if (!Array.isArray(content) || content.some((part) => !isRecord(part) || part.type !== 'text' || typeof part.text !== 'string')) {
    return 'a tool-result block needs a "content" array of text blocks'
  }
  return stringFields(block, ['callId', 'name']) ?? (block.isError !== undefined && typeof block.isError !== 'boolean' ? '"isError" must be a boolean' : undefined)
}

function permissionProblem(permission: unknown): string | undefined {
  if (permission === undefined) return undefined
  if (!isRecord(permission) || !(TOOL_PERMISSION_DECISIONS as readonly unknown[]).includes(permission.decision)) {
    return `must be an object whose "decision" is ${TOOL_PERMISSION_DECISIONS.map((decision) => `"${decision}"`).join(', ')}`
  }
  if (typeof permission.by !== 'string') return 'needs a string "by"'
  if (permission.decision === 'reject' && typeof permission.reason !== 'string') return 'of a rejection needs a string "reason"'
  if (permission.source !== undefined && !(PERMISSION_SOURCES as readonly unknown[]).includes(permission.source)) return `has an unknown "source" ${quoted(permission.source)}`
  if (permission.rule !== undefined && typeof permission.rule !== 'string') return '"rule" must be a string'
  if (permission.at !== undefined && !isCount(permission.at)) return '"at" must be a time in milliseconds'
  return undefined
}

function approvalRequestProblem(request: unknown): string | undefined {
  if (!isRecord(request)) return 'must be an object'
  if (!Array.isArray(request.path) || !request.path.every((name) => typeof name === 'string')) return '"path" must be a list of strings'
  if (typeof request.tool !== 'string' || typeof request.subject !== 'string') return 'needs a string "tool" and "subject"'
  if (request.child !== undefined && typeof request.child !== 'string') return '"child" must be a string'
  return undefined
}

function usageProblem(usage: unknown): string | undefined {
  if (usage === undefined) return undefined
  if (!isRecord(usage) || !isCount(usage.inputTokens) || !isCount(usage.outputTokens)) return '"usage" must be an object with integer "inputTokens" and "outputTokens"'
  return undefined
}

function stringFields(block: Json, keys: readonly string[]): string | undefined {
  const missing = keys.find((key) => typeof block[key] !== 'string')
  return missing === undefined ? undefined : `a ${block.type} block needs a string "${missing}"`
}

function countField(event: Json, key: string): string | undefined {
  return isCount(event[key]) ? undefined : `"${key}" must be a non-negative integer`
}

function prefixed(where: string, problem: string | undefined): string | undefined {
  return problem === undefined ? undefined : `${where} ${problem}`
}

export function isCount(value: unknown): value is number {
  return Number.isSafeInteger(value) && (value as number) >= 0
}

export function isFiniteNumber(value: unknown): value is number {
  return typeof value === 'number' && Number.isFinite(value)
}

/** A value from the file, quoted for a one-line message: JSON, at most 60 characters. */
export function quoted(value: unknown): string {
  const text = JSON.stringify(value) ?? String(value)
  return text.length > 60 ? text.slice(0, 60) + '…' : text
}
