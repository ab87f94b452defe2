import { errorMessage, isRecord as isObject, parseStopReason } from '@dsh/base'
import { permissionLevelsProblem, readDelegationBudget, SESSION_EVENT_TYPES, type SessionEvent, type SessionEventType, type SessionHeader, type StoredSession } from '@dsh/session'
import { CorruptSessionFileError } from './errors.js'
import { eventBodyProblem, isCount, isFiniteNumber, quoted } from './event-shape.js'
import { FORMAT_VERSION } from './format.js'

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
        if (seq !== expected) throw new CorruptSessionFileError(file, line, `resume record has seq ${quoted(seq)}, but the next event is ${expected}; the file and the session that resumed it disagree`)
        if (!isFiniteNumber(value.ts)) throw new CorruptSessionFileError(file, line, 'resume record has no numeric "ts"')
        continue
      }
      if (value.kind === 'header') throw new CorruptSessionFileError(file, line, 'a second header record; a session file has exactly one, on line 1')
      throw new CorruptSessionFileError(file, line, `unknown record kind ${quoted(value.kind)}`)
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
  if (value.version !== FORMAT_VERSION) throw fail(`format version ${quoted(value.version)} is not supported; this build of dsh reads version ${FORMAT_VERSION} (a newer dsh wrote it?)`)
  const header = value.header
  if (!isObject(header)) throw fail('the header record has no "header" object')
  // No dsh writes it, and a copy by assignment would make it the header's prototype.
  if (Object.hasOwn(header, '__proto__')) throw fail('the header has a "__proto__" key; no dsh writes one')
  for (const key of ['id', 'createdAt', 'cwd'] as const) {
    if (typeof header[key] !== 'string') throw fail(`header.${key} must be a string`)
  }
  if (header.id !== id) throw fail(`header.id ${quoted(header.id)} does not match the file name (session ${quoted(id)})`)
  for (const key of ['parentSession', 'origin', 'provider', 'label', 'toolCallId'] as const) {
    if (header[key] !== undefined && typeof header[key] !== 'string') throw fail(`header.${key} must be a string when present`)
  }
  if (header.attempt !== undefined && !(isCount(header.attempt) && (header.attempt as number) >= 1)) throw fail('header.attempt must be a whole number from 1 when present')
  for (const key of ['delegationDepth', 'maxDepth', 'seedLength'] as const) {
    if (header[key] !== undefined && !isCount(header[key])) throw fail(`header.${key} must be a non-negative integer when present`)
  }
  if (header.descriptor !== undefined && !isObject(header.descriptor)) throw fail('header.descriptor must be an object when present')
  if (header.helper !== undefined && !(isObject(header.helper) && typeof header.helper.name === 'string' && typeof header.helper.hash === 'string')) {
    throw fail('header.helper must be { name, hash } (two strings) when present')
  }
  if (header.trace !== undefined && !(isObject(header.trace) && typeof header.trace.traceparent === 'string' && (header.trace.tracestate === undefined || typeof header.trace.tracestate === 'string'))) {
    throw fail('header.trace must be { traceparent: string, tracestate?: string } when present')
  }
  if (header.budget !== undefined && readDelegationBudget(header.budget) === undefined) throw fail('header.budget must be { outputTokens?, inputTokens?, cost?, children?, wallTimeMs? } of non-negative numbers when present')
  if (header.workspace !== undefined) {
    const workspace = header.workspace
    if (!isObject(workspace) || (workspace.mode !== 'worktree' && workspace.mode !== 'copy') || typeof workspace.path !== 'string' || typeof workspace.source !== 'string' || (workspace.branch !== undefined && typeof workspace.branch !== 'string') || (workspace.base !== undefined && typeof workspace.base !== 'string') || (workspace.gitDir !== undefined && typeof workspace.gitDir !== 'string')) {
      throw fail('header.workspace must be { mode: "worktree" | "copy", path, source, branch?, base? } when present')
    }
  }
  if (header.sandbox !== undefined && !(isObject(header.sandbox) && typeof header.sandbox.network === 'boolean')) throw fail('header.sandbox must be { network: boolean } when present')
  if (header.permissions !== undefined) {
    const problem = permissionLevelsProblem(header.permissions, 'header.permissions')
    if (problem) throw fail(problem)
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
    return { ok: false, error: errorMessage(error) }
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
    throw fail(`unknown event type ${quoted(value.type)}`)
  }
  const problem = eventBodyProblem(value.type as SessionEventType, value)
  if (problem) throw fail(`${value.type} event: ${problem}`)
  // Logs written before the `refusal` reason existed say `blocked`: read them in today's words.
  if (value.type === 'turn/end') value.reason = parseStopReason(value.reason)
  return value as unknown as SessionEvent
}

function preview(line: string): string {
  return JSON.stringify(line.length > 60 ? line.slice(0, 60) + '…' : line)
}
