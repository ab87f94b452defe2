/**
 * What a well-formed progress update is, and how long its display strings may be. A
 * transport's progress is untrusted: anything that does not fit is dropped (and logged by
 * the channel), never allowed to end or stall the run.
 */
import { assertNever, isRecord, printable } from '@dsh/base'
import type { SubagentProgress, SubagentUsage } from '../types.js'
import { truncateColumns } from './columns.js'

/** Longest tool name kept, in terminal columns. */
export const MAX_TOOL_NAME = 80
/** Longest tool-argument summary or tool-end detail kept, in terminal columns. */
export const MAX_DETAIL = 160
/** Longest status line kept, in terminal columns. */
export const MAX_STATUS = 200

/** `value` cut to `limit` terminal columns, with an ellipsis when it was cut (never inside a character). */
export function shorten(value: string, limit: number): string {
  return truncateColumns(value, limit)
}

/**
 * `text` as one display line: every run of whitespace (newlines included) becomes one
 * space and control characters are escaped, so nothing from a child can move a
 * terminal's cursor, clear its screen or split a line of a redrawn tree.
 */
export function displayLine(text: string): string {
  return printable(text.replace(/\s+/g, ' ')).trim()
}

/**
 * A tool call's argument summary as a person reads it at a glance: the value alone when
 * the call has a single text argument (`{"command":"ls -la"}` → `ls -la`), else the
 * summary as given; one display line of at most `limit` terminal columns. The value is
 * cleaned after it is parsed: JSON escapes (`\u001b`) turn back into control characters.
 */
export function compactArgs(args: string, limit: number): string {
  let shown = args
  try {
    const parsed: unknown = JSON.parse(args)
    if (isRecord(parsed)) {
      const values = Object.values(parsed)
      if (values.length === 1 && typeof values[0] === 'string') shown = values[0]
    }
  } catch {
    // A summary cut short (or plain text) is not JSON: it is shown as it is.
  }
  return shorten(displayLine(shown.slice(0, limit * 4)), limit)
}

/** A one-line, bounded display form of a tool call's arguments (JSON, or the text as given). */
export function summariseArgs(args: unknown): string {
  let raw: string
  if (typeof args === 'string') raw = args
  else {
    try {
      raw = JSON.stringify(args) ?? ''
    } catch {
      // Arguments that cannot be serialised (a cycle, a BigInt) are shown as their kind only.
      raw = `[${typeof args}]`
    }
  }
  // Cut before cleaning: `printable` walks the whole string, and arguments can be megabytes.
  return shorten(displayLine(raw.slice(0, MAX_DETAIL * 2)), MAX_DETAIL)
}

function isCount(value: unknown): value is number {
  return typeof value === 'number' && Number.isFinite(value) && value >= 0
}

function isUsage(value: unknown): value is SubagentUsage {
  return isRecord(value) && isCount(value.inputTokens) && isCount(value.outputTokens) && isCount(value.cachedInputTokens)
}

/** Why `update` is not a well-formed progress update, or `undefined` when it is. */
export function progressProblem(update: unknown): string | undefined {
  if (!isRecord(update)) return 'not an object'
  const kind = update.kind as SubagentProgress['kind']
  switch (kind) {
    case 'text':
    case 'status':
      return typeof update.text === 'string' ? undefined : `a ${kind} update without text`
    case 'tool-start':
      if (typeof update.callId !== 'string' || typeof update.name !== 'string' || !update.name) return 'a tool-start without a call id and a name'
      return update.args === undefined || typeof update.args === 'string' ? undefined : 'a tool-start whose args are not text'
    case 'tool-end':
      if (typeof update.callId !== 'string' || typeof update.name !== 'string' || typeof update.ok !== 'boolean') return 'a tool-end without a call id, a name and ok'
      return update.detail === undefined || typeof update.detail === 'string' ? undefined : 'a tool-end whose detail is not text'
    case 'usage':
      return isUsage(update.usage) ? undefined : 'a usage update without whole token counts'
    default: {
      // Every known kind is handled above; what arrives from outside may still be anything.
      const unknownKind: unknown = kind satisfies never
      return typeof unknownKind === 'string' ? `an update of unknown kind "${shorten(printable(unknownKind), 40)}"` : 'an update without a kind'
    }
  }
}

/** A copy of a well-formed `update` with every display string bounded (text is bounded by the channel). */
export function bounded(update: SubagentProgress): SubagentProgress {
  switch (update.kind) {
    case 'text':
      return { kind: 'text', text: update.text }
    case 'status':
      return { kind: 'status', text: shorten(displayLine(update.text.slice(0, MAX_STATUS * 2)), MAX_STATUS) }
    case 'tool-start': {
      const start: SubagentProgress = { kind: 'tool-start', callId: shorten(update.callId, MAX_TOOL_NAME), name: shorten(displayLine(update.name.slice(0, MAX_TOOL_NAME * 2)), MAX_TOOL_NAME) }
      if (update.args !== undefined) start.args = shorten(displayLine(update.args.slice(0, MAX_DETAIL * 2)), MAX_DETAIL)
      return start
    }
    case 'tool-end': {
      const end: SubagentProgress = { kind: 'tool-end', callId: shorten(update.callId, MAX_TOOL_NAME), name: shorten(displayLine(update.name.slice(0, MAX_TOOL_NAME * 2)), MAX_TOOL_NAME), ok: update.ok }
      if (update.detail !== undefined) end.detail = shorten(displayLine(update.detail.slice(0, MAX_DETAIL * 2)), MAX_DETAIL)
      return end
    }
    case 'usage':
      return { kind: 'usage', usage: { inputTokens: update.usage.inputTokens, outputTokens: update.usage.outputTokens, cachedInputTokens: update.usage.cachedInputTokens } }
    default:
      return assertNever(update, 'progress kind')
  }
}
