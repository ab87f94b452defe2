import { FINISH_REASONS, isRecord, type FinishReason } from '@dsh/base'
import type { ToolCallBlock } from '@dsh/llm'
import { ScriptError } from './errors.js'
import { charsOfContent } from './estimate-tokens.js'
import type { CompiledCall, CompiledReply, CompiledRule, CompiledScript } from './script.js'
import { splitText } from './split-text.js'

/** The placeholder replaced, inside reply text, by the latest tool result's text. */
export const LAST_TOOL_RESULT = '{{last_tool_result}}'
/** Every tool result of the latest step, one per line (parallel calls). */
export const TOOL_RESULTS = '{{tool_results}}'

type Fields = Record<string, unknown>

/**
 * Validate an untrusted script value (parsed YAML/JSON or config) and compile it: regexes
 * are built and placeholders located once here, so playing a reply does no parsing.
 * Throws `ScriptError('INVALID_SCRIPT')` naming `source` and the path of the bad element.
 */
export function compileScript(value: unknown, source: string): CompiledScript {
  const fail = (path: string, problem: string): never => {
    throw new ScriptError('INVALID_SCRIPT', `${source}: ${path ? `${path}: ` : ''}${problem}`)
  }
  let rules: unknown
  if (Array.isArray(value)) {
    rules = value
  } else if (isFields(value) && 'rules' in value) {
    checkKeys(value, ['rules'], '', fail)
    rules = value.rules
    if (!Array.isArray(rules)) fail('rules', 'must be a list of rules')
  } else {
    fail('', 'a script must be a list of rules (or an object { rules: [...] })')
  }
  const list = rules as unknown[]
  if (list.length === 0) fail('rules', 'the script has no rules')
  return { source, rules: list.map((rule, index) => compileRule(rule, index, fail)) }
}

type Fail = (path: string, problem: string) => never

function compileRule(value: unknown, index: number, fail: Fail): CompiledRule {
  const path = `rules[${index}]`
  if (!isFields(value)) return fail(path, 'a rule must be an object with "reply" (and optionally "when")')
  checkKeys(value, ['when', 'reply'], path, fail)
  const rule: CompiledRule = { index, replies: [] }
  if (value.when !== undefined && value.when !== null) {
    const when = value.when
    if (!isFields(when)) return fail(`${path}.when`, 'must be an object with "prompt" and/or "depth"')
    checkKeys(when, ['prompt', 'depth'], `${path}.when`, fail)
    if (when.prompt !== undefined) rule.prompt = compileRegex(when.prompt, `${path}.when.prompt`, fail)
    if (when.depth !== undefined) {
      if (!isNatural(when.depth)) fail(`${path}.when.depth`, `must be an integer >= 0, got ${show(when.depth)}`)
      rule.depth = when.depth as number
    }
  }
  if (value.reply === undefined) fail(path, 'missing "reply" (a list of replies)')
  if (!Array.isArray(value.reply)) return fail(`${path}.reply`, 'must be a list of replies')
  if (value.reply.length === 0) fail(`${path}.reply`, 'must list at least one reply')
  rule.replies = value.reply.map((item, i) => compileReply(item, `${path}.reply[${i}]`, fail))
  return rule
}

function compileRegex(value: unknown, path: string, fail: Fail): RegExp {
  if (typeof value !== 'string') return fail(path, `must be a regular expression string, got ${show(value)}`)
  try {
    return new RegExp(value)
  } catch (error) {
    return fail(path, `invalid regular expression: ${(error as Error).message}`)
  }
}

function compileReply(value: unknown, path: string, fail: Fail): CompiledReply {
  if (!isFields(value)) return fail(path, 'a reply must be an object with text, call, calls, error or finish')
  checkKeys(value, ['text', 'call', 'calls', 'error', 'delay_ms', 'finish'], path, fail)
  const { text, call, calls, error, delay_ms: delay, finish } = value
  const reply: CompiledReply = { calls: [], callChars: 0, delayMs: 0 }
  if (text === undefined && call === undefined && calls === undefined && error === undefined && finish === undefined) {
    fail(path, 'a reply needs text, call, calls, error or finish')
  }
  if (finish !== undefined) {
    if (!(FINISH_REASONS as readonly unknown[]).includes(finish)) fail(`${path}.finish`, `must be one of ${FINISH_REASONS.join(', ')}, got ${show(finish)}`)
    if (error !== undefined) fail(path, '"finish" cannot be combined with "error" (a failed request has no finish)')
    reply.finish = finish as FinishReason
  }
  if (error !== undefined) {
    if (typeof error !== 'string') fail(`${path}.error`, `must be a string, got ${show(error)}`)
    if (text !== undefined || call !== undefined || calls !== undefined) {
      fail(path, '"error" cannot be combined with text, call or calls (the request fails instead of answering)')
    }
    reply.error = error as string
  }
  if (text !== undefined) {
    if (typeof text !== 'string') fail(`${path}.text`, `must be a string, got ${show(text)}`)
    reply.textParts = (text as string).split(LAST_TOOL_RESULT)
    if ((text as string).includes(TOOL_RESULTS)) reply.usesToolResults = true
  }
  if (call !== undefined && calls !== undefined) fail(path, 'use either "call" or "calls", not both')
  if (call !== undefined) reply.calls = [compileCall(call, `${path}.call`, fail)]
  if (calls !== undefined) {
    if (!Array.isArray(calls)) return fail(`${path}.calls`, 'must be a list of { tool, args }')
    if (calls.length === 0) fail(`${path}.calls`, 'must list at least one call')
    reply.calls = calls.map((item, i) => compileCall(item, `${path}.calls[${i}]`, fail))
  }
  if (delay !== undefined) {
    if (!isNatural(delay)) fail(`${path}.delay_ms`, `must be an integer >= 0, got ${show(delay)}`)
    reply.delayMs = delay as number
  }
  const parts = reply.textParts
  const fixedText = parts === undefined ? '' : parts.length === 1 && reply.usesToolResults !== true ? parts[0] : undefined
  if (fixedText !== undefined) {
    reply.fixedText = fixedText
    reply.fixedPieces = splitText(fixedText)
  }
  reply.callChars = charsOfContent(reply.calls.map((item): ToolCallBlock => ({ type: 'tool-call', id: '', name: item.name, args: item.args })))
  return reply
}

function compileCall(value: unknown, path: string, fail: Fail): CompiledCall {
  if (!isFields(value)) return fail(path, 'a call must be an object { tool, args }')
  checkKeys(value, ['tool', 'args'], path, fail)
  if (value.tool === undefined) fail(path, 'missing "tool" (the tool name)')
  if (typeof value.tool !== 'string' || value.tool === '') fail(`${path}.tool`, `must be a non-empty string, got ${show(value.tool)}`)
  let args: Record<string, unknown> = {}
  if (value.args !== undefined && value.args !== null) {
    if (!isFields(value.args)) fail(`${path}.args`, `must be an object, got ${show(value.args)}`)
    args = value.args as Record<string, unknown>
  }
  return { name: value.tool as string, args }
}

function checkKeys(value: Fields, allowed: readonly string[], path: string, fail: Fail): void {
  for (const key of Object.keys(value)) {
    if (!allowed.includes(key)) {
      fail(path, `unknown key ${JSON.stringify(key)} (allowed: ${allowed.join(', ')})`)
    }
  }
}

function isFields(value: unknown): value is Fields {
  return isRecord(value)
}

function isNatural(value: unknown): boolean {
  return typeof value === 'number' && Number.isInteger(value) && value >= 0
}

function show(value: unknown): string {
  if (value === null) return 'null'
  if (Array.isArray(value)) return 'a list'
  if (typeof value === 'object') return 'an object'
  return JSON.stringify(value) ?? String(value)
}
