import { parseTurnEndReason } from '@dsh/base'
import {
  SESSION_EVENT_TYPES,
  type SessionEvent,
  type SessionEventBody,
  type SessionEventType,
  type SessionHeader,
  type StoredSession,
} from '@dsh/session'
import { CorruptSessionFileError } from './errors.js'
import { FORMAT_VERSION } from './format.js'

type Json = Record<string, unknown>
type FinishReason = NonNullable<Extract<SessionEventBody, { type: 'assistant/message' }>['finish']>

// Records keyed by the union: adding a member upstream fails the build here instead of
// rejecting files written with it.
const FINISH_REASONS: Record<FinishReason, true> = { stop: true, 'tool-calls': true, length: true, 'content-filter': true }

type ParsedLine = { ok: true; value: unknown } | { ok: false; error: string }

/**
 * Parse and validate a whole session file (see format.ts). Every line is checked; the
 * only thing ever dropped is a torn tail left by an interrupted write, and that is
 * reported in `warnings`. Anything else that is wrong throws, naming the file and line.
 */
export function parseSessionFile(text: string, file: string, id: string): StoredSession {
  const lines = text.split('\n')
  const terminated = text.endsWith('\n')
  if (terminated) lines.pop()
  if (text.length === 0) throw new CorruptSessionFileError(file, 1, 'the file is empty; it has no header line')

  const parsed = lines.map(parseLine)
  const first = parsed[0]
  if (!first.ok) throw new CorruptSessionFileError(file, 1, `the header line is not valid JSON (${first.error}); the session cannot be recovered without it`)
  const header = headerOf(first.value, file, id)

  const events: SessionEvent[] = []
  const warnings: string[] = []
  let expected = header.seedLength ?? 0
  for (let index = 1; index < lines.length; index++) {
    const line = index + 1
    const entry = parsed[index]
    if (!entry.ok) {
      // A run of unreadable lines is a torn tail when nothing follows it, or when the
      // next line is the resume record a later writer puts after a torn tail.
      let end = index
      while (end < lines.length && !parsed[end].ok) end++
      const next = parsed[end]
      const resumedAfter = next?.ok === true && isResumeRecord(next.value)
      if (end < lines.length && !resumedAfter) {
        throw new CorruptSessionFileError(file, line, `not valid JSON (${entry.error}); only a torn tail (the last lines, or lines right before a resume record) is dropped, never a line in the middle; to salvage the events before it, copy the file and cut the copy at this line`)
      }
      for (let torn = index; torn < end; torn++) {
        const unterminated = torn === lines.length - 1 && !terminated
        warnings.push(
          `${file}:${torn + 1}: dropped a torn line left by an interrupted write (${Buffer.byteLength(lines[torn])} bytes${unterminated ? ', no trailing newline' : ''}, not valid JSON: ${preview(lines[torn])}); ` +
            (resumedAfter ? `a later writer resumed at line ${end + 1}; ` : '') +
            `kept the ${events.length} event${events.length === 1 ? '' : 's'} before it`,
        )
      }
      index = end - 1
      continue
    }
    const value = entry.value
    if (isObject(value) && 'kind' in value) {
      if (value.kind === 'resume') {
        const seq = value.seq
        if (seq !== expected) throw new CorruptSessionFileError(file, line, `resume record has seq ${JSON.stringify(seq)}, but the next event is ${expected}; the file and the session that resumed it disagree`)
        if (!isFiniteNumber(value.ts)) throw new CorruptSessionFileError(file, line, 'resume record has no numeric "ts"')
        continue
      }
      if (value.kind === 'header') throw new CorruptSessionFileError(file, line, 'a second header record; a session file has exactly one, on line 1')
      throw new CorruptSessionFileError(file, line, `unknown record kind ${JSON.stringify(value.kind)}`)
    }
    events.push(eventOf(value, file, line, expected))
    expected++
  }
  return { header, events, warnings }
}

/** Validate line 1 (already parsed as JSON) as the header record of session `id`. */
export function headerOf(value: unknown, file: string, id: string): SessionHeader {
  const fail = (detail: string) => new CorruptSessionFileError(file, 1, detail)
  if (!isObject(value) || value.kind !== 'header') throw fail('the first line is not a header record ({"kind":"header",…})')
  if (value.version !== FORMAT_VERSION) throw fail(`format version ${JSON.stringify(value.version)} is not supported; this build reads version ${FORMAT_VERSION}`)
  const header = value.header
  if (!isObject(header)) throw fail('the header record has no "header" object')
  for (const key of ['id', 'createdAt', 'cwd'] as const) {
    if (typeof header[key] !== 'string') throw fail(`header.${key} must be a string`)
  }
  if (header.id !== id) throw fail(`header.id ${JSON.stringify(header.id)} does not match the file name (session ${JSON.stringify(id)})`)
  for (const key of ['parentSession', 'origin', 'provider', 'label'] as const) {
    if (header[key] !== undefined && typeof header[key] !== 'string') throw fail(`header.${key} must be a string when present`)
  }
  for (const key of ['delegationDepth', 'seedLength'] as const) {
    if (header[key] !== undefined && !isCount(header[key])) throw fail(`header.${key} must be a non-negative integer when present`)
  }
  if ((header.seedLength as number | undefined) && header.parentSession === undefined) {
    throw fail(`header.seedLength is ${header.seedLength} but there is no header.parentSession to take the seed from`)
  }
  return header as unknown as SessionHeader
}

export function parseLine(line: string): ParsedLine {
  try {
    return { ok: true, value: JSON.parse(line) as unknown }
  } catch (error) {
    return { ok: false, error: error instanceof Error ? error.message : String(error) }
  }
}

function isResumeRecord(value: unknown): boolean {
  return isObject(value) && value.kind === 'resume'
}

function eventOf(value: unknown, file: string, line: number, expected: number): SessionEvent {
  const fail = (detail: string) => new CorruptSessionFileError(file, line, detail)
  if (!isObject(value)) throw fail('expected an event object')
  if (!isCount(value.seq)) throw fail('the event has no integer "seq"')
  if (value.seq !== expected) throw fail(`the event has seq ${value.seq}, expected ${expected}; events must be contiguous`)
  if (!isFiniteNumber(value.ts)) throw fail('the event has no numeric "ts"')
  if (typeof value.type !== 'string' || !(SESSION_EVENT_TYPES as readonly string[]).includes(value.type)) {
    throw fail(`unknown event type ${JSON.stringify(value.type)}`)
  }
  const problem = bodyProblem(value.type as SessionEventType, value)
  if (problem) throw fail(`${value.type} event: ${problem}`)
  // Logs written before the `refusal` reason existed say `blocked`: read them in today's words.
  if (value.type === 'turn/end') value.reason = parseTurnEndReason(value.reason)
  return value as unknown as SessionEvent
}

/** The type-specific top-level fields; message and block contents are not re-checked. */
function bodyProblem(type: SessionEventType, event: Json): string | undefined {
  switch (type) {
    case 'turn/start':
      return countField(event, 'turn')
    case 'step/start':
    case 'step/end':
      return countField(event, 'step')
    case 'user/message':
      return messageField(event, 'user')
    case 'assistant/message':
      return (
        messageField(event, 'assistant') ??
        (event.finish !== undefined && !(typeof event.finish === 'string' && Object.hasOwn(FINISH_REASONS, event.finish)) ? `unknown finish ${JSON.stringify(event.finish)}` : undefined) ??
        (event.usage !== undefined && !isObject(event.usage) ? '"usage" must be an object' : undefined)
      )
    case 'tool/call':
      return blockField(event, 'call', 'tool-call', ['id', 'name'])
    case 'tool/result':
      return blockField(event, 'result', 'tool-result', ['callId', 'name'])
    case 'turn/end':
      return (
        countField(event, 'turn') ??
        (parseTurnEndReason(event.reason) !== undefined ? undefined : `unknown reason ${JSON.stringify(event.reason)}`) ??
        (event.error !== undefined && typeof event.error !== 'string' ? '"error" must be a string' : undefined)
      )
    default:
      return assertNever(type)
  }
}

function countField(event: Json, key: string): string | undefined {
  return isCount(event[key]) ? undefined : `"${key}" must be a non-negative integer`
}

function messageField(event: Json, role: 'user' | 'assistant'): string | undefined {
  const message = event.message
  if (!isObject(message) || message.role !== role || !Array.isArray(message.content)) return `"message" must be a ${role} message with a content array`
  return undefined
}

function blockField(event: Json, key: string, blockType: string, stringKeys: string[]): string | undefined {
  const block = event[key]
  if (!isObject(block) || block.type !== blockType || stringKeys.some((name) => typeof block[name] !== 'string')) {
    return `"${key}" must be a ${blockType} block with ${stringKeys.map((name) => `"${name}"`).join(' and ')}`
  }
  return undefined
}

function isObject(value: unknown): value is Json {
  return typeof value === 'object' && value !== null && !Array.isArray(value)
}

function isCount(value: unknown): value is number {
  return Number.isInteger(value) && (value as number) >= 0
}

function isFiniteNumber(value: unknown): value is number {
  return typeof value === 'number' && Number.isFinite(value)
}

function preview(line: string): string {
  return JSON.stringify(line.length > 60 ? line.slice(0, 60) + '…' : line)
}

function assertNever(value: never): never {
  throw new Error(`unexpected event type ${JSON.stringify(value)}`)
}
