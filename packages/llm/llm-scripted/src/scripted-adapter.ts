import { resolve } from 'node:path'
import { LlmError, textOf, type ContentBlock, type LlmAdapter, type LlmChunk, type LlmRequest, type ToolCallBlock } from '@dsh/llm'
import { abortableDelay, throwIfAborted } from './abortable-delay.js'
import { compileScript, TOOL_RESULTS } from './compile-script.js'
import { ScriptError, type ScriptErrorCode } from './errors.js'
import { charsOfContent, estimateInputTokens, outputTokensOf } from './estimate-tokens.js'
import { lastToolResultText, stepToolResultsText } from './last-tool-result.js'
import type { CompiledReply, CompiledScript, Script } from './script.js'
import { ScriptFileCache } from './script-file-cache.js'
import { SessionBindings } from './session-bindings.js'
import { splitText } from './split-text.js'

export interface ScriptedAdapterOptions {
  /** Adapter name, the prefix of model specs. Default `scripted`. */
  name?: string
  /** Scripts by name; `scripted:NAME` plays the inline script NAME before looking for a file. */
  scripts?: Record<string, Script>
  /** Most sessions whose cursors are kept (least recently used dropped first). Default 10,000. */
  maxSessions?: number
  /** How long a loaded script file is trusted before its mtime is checked again. Default 1,000 ms. */
  recheckMs?: number
  /**
   * What rules are matched against, looked up by session id when a session is first bound
   * (the plugin reads them from `ctx.sessions`). Without it, or for a session it does not
   * know, the facts come from the request: the first user message's text, depth 0.
   */
  sessionFacts?: (sessionId: string) => SessionFacts | undefined
}

/** What a rule's `when` is matched against. */
export interface SessionFacts {
  /** Text of the first user message the session itself received (after any fork seed). */
  ownPrompt: string
  /** 0 for a top-level session. */
  delegationDepth: number
  /**
   * Model requests the session already made (a resumed session's earlier steps, each of
   * which consumed a reply): its cursor starts after them, so a resumed script continues
   * where its log left off. Default 0.
   */
  earlierReplies?: number
}

interface ResolvedScript {
  /** Identity of the script for session bindings: `inline:NAME` or the absolute file path. */
  key: string
  script: CompiledScript
}

/**
 * A keyless model that plays replies from a script. Each session is bound, at its first
 * request, to the first rule matching its own prompt and depth, then consumes that rule's
 * replies one per request. See the package README for the script format.
 */
export class ScriptedAdapter implements LlmAdapter {
  readonly name: string
  private inline = new Map<string, CompiledScript>()
  private files: ScriptFileCache
  private sessions: SessionBindings
  private callCount = 0
  private requests = 0
  private readonly sessionFacts: ((sessionId: string) => SessionFacts | undefined) | undefined

  constructor(options: ScriptedAdapterOptions = {}) {
    this.name = options.name ?? 'scripted'
    for (const [name, script] of Object.entries(options.scripts ?? {})) {
      this.inline.set(name, compileScript(script, `inline script ${JSON.stringify(name)}`))
    }
    this.files = new ScriptFileCache(options.recheckMs ?? 1000)
    this.sessions = new SessionBindings(options.maxSessions ?? 10_000)
    this.sessionFacts = options.sessionFacts
  }

  /**
   * The reply's chunks, worked out at the first `next()` (as a generator would) and then
   * handed out from an array: a scripted reply is known whole, and an async generator
   * costs a promise chain per chunk that a fan-out of a thousand children pays for.
   */
  stream(request: LlmRequest): AsyncIterableIterator<LlmChunk> {
    let chunks: LlmChunk[] | undefined
    let failed = false
    let index = 0
    const step = (): IteratorResult<LlmChunk, undefined> =>
      chunks !== undefined && index < chunks.length ? { done: false, value: chunks[index++]! } : { done: true, value: undefined }
    const iterator: AsyncIterableIterator<LlmChunk> = {
      next: () => {
        if (chunks !== undefined || failed) return Promise.resolve(step())
        let prepared: LlmChunk[] | Promise<LlmChunk[]>
        try {
          prepared = this.reply(request)
        } catch (error) {
          failed = true
          return Promise.reject(error)
        }
        if (Array.isArray(prepared)) {
          chunks = prepared
          return Promise.resolve(step())
        }
        return prepared.then(
          (ready) => {
            chunks = ready
            return step()
          },
          (error: unknown) => {
            failed = true
            throw error
          },
        )
      },
      return: () => {
        chunks = []
        return Promise.resolve({ done: true, value: undefined })
      },
      [Symbol.asyncIterator]: () => iterator,
    }
    return iterator
  }

  /** Count the request and pick its reply; a promise only when a script file must be read or the reply waits. */
  private reply(request: LlmRequest): LlmChunk[] | Promise<LlmChunk[]> {
    this.requests++
    throwIfAborted(request.signal)
    const inline = this.inline.get(request.model)
    if (inline) return this.answer({ key: `inline:${request.model}`, script: inline }, request)
    return this.scriptFor(request.model).then((script) => this.answer(script, request))
  }

  private answer(script: ResolvedScript, request: LlmRequest): LlmChunk[] | Promise<LlmChunk[]> {
    const reply = this.nextReply(script, request)
    if (reply.delayMs > 0) return abortableDelay(reply.delayMs, request.signal).then(() => this.played(reply, request))
    return this.played(reply, request)
  }

  private played(reply: CompiledReply, request: LlmRequest): LlmChunk[] {
    if (reply.error !== undefined) throw new LlmError('SIMULATED', reply.error)
    return this.play(reply, request)
  }

  /** Drop a session's rule binding and cursor (e.g. when the session ends). */
  forget(sessionId: string): boolean {
    return this.sessions.forget(sessionId)
  }

  /** Requests made of this adapter so far (every `stream` call, failed ones included). */
  get requestCount(): number {
    return this.requests
  }

  /** Sessions whose binding is currently held. */
  get sessionCount(): number {
    return this.sessions.size
  }

  /** Load (and so validate) the script a spec names: a missing or broken file fails here, before any session. */
  async prepare(model: string): Promise<void> {
    await this.scriptFor(model)
  }

  private async scriptFor(model: string): Promise<ResolvedScript> {
    const inline = this.inline.get(model)
    if (inline) return { key: `inline:${model}`, script: inline }
    const path = resolve(process.cwd(), model)
    return { key: path, script: await this.files.get(path) }
  }

  /** Bind the session on its first request, then advance its cursor; fail loud when the script has no reply. */
  private nextReply({ key, script }: ResolvedScript, request: LlmRequest): CompiledReply {
    const { sessionId } = request.origin
    let binding = this.sessions.touch(sessionId)
    if (!binding || binding.scriptKey !== key) {
      // Looked up only when binding: a bound session's requests cost no session look-up.
      const facts = this.factsOf(request)
      const rule = script.rules.find((candidate) =>
        (candidate.depth === undefined || candidate.depth === facts.delegationDepth) &&
        (candidate.prompt === undefined || candidate.prompt.test(facts.ownPrompt)))
      if (!rule) throw noReply('NO_RULE', sessionId, facts, `no rule in ${script.source} matches`)
      binding = { scriptKey: key, ruleIndex: rule.index, cursor: facts.earlierReplies ?? 0 }
      this.sessions.bind(sessionId, binding)
    }
    const rule = script.rules[binding.ruleIndex]
    if (!rule) {
      throw noReply('OUT_OF_REPLIES', sessionId, this.factsOf(request), `it is bound to rules[${binding.ruleIndex}], which the edited ${script.source} no longer has`)
    }
    const reply = rule.replies[binding.cursor]
    if (!reply) {
      const count = rule.replies.length
      throw noReply('OUT_OF_REPLIES', sessionId, this.factsOf(request), `rules[${rule.index}] in ${script.source} has only ${count} ${count === 1 ? 'reply' : 'replies'}`)
    }
    binding.cursor++
    return reply
  }

  private factsOf(request: LlmRequest): SessionFacts {
    return this.sessionFacts?.(request.origin.sessionId) ?? factsFromRequest(request)
  }

  /**
   * The reply's chunks, in the order the README states. Built as one array (not a
   * generator spread into one); what does not depend on the request (the split of a fixed
   * text, the size of the calls) is worked out at a reply's first play and reused, since a
   * fan-out plays the same child reply a thousand times.
   */
  private play(reply: CompiledReply, request: LlmRequest): LlmChunk[] {
    const fixed = fixedPartsOf(reply)
    const text = fixed.text ?? replyText(reply, request)
    const pieces = fixed.pieces ?? splitText(text)
    const chunks: LlmChunk[] = []
    for (const piece of pieces) chunks.push({ type: 'text-delta', text: piece })
    for (const call of reply.calls) {
      // A copy per request: consumers may fill in defaults on the arguments they receive.
      const block: ToolCallBlock = { type: 'tool-call', id: `call_${++this.callCount}`, name: call.name, args: copyArgs(call.args) }
      chunks.push({ type: 'tool-call', call: block })
    }
    const usage = { inputTokens: estimateInputTokens(request.system, request.messages), outputTokens: outputTokensOf(text.length, fixed.callChars) }
    chunks.push({ type: 'usage', usage })
    chunks.push({ type: 'finish', reason: reply.finish ?? (reply.calls.length > 0 ? 'tool-calls' : 'stop') })
    return chunks
  }
}

/** What a reply streams the same way on every request; see `ScriptedAdapter.play`. */
interface FixedParts {
  /** The reply's text when it has no placeholder (else worked out per request). */
  text: string | undefined
  pieces: readonly string[] | undefined
  /** Characters the calls count for in `outputTokens` (their names and arguments as JSON). */
  callChars: number
}

const fixedParts = new WeakMap<CompiledReply, FixedParts>()

function fixedPartsOf(reply: CompiledReply): FixedParts {
  let fixed = fixedParts.get(reply)
  if (fixed === undefined) {
    const parts = reply.textParts
    const text = parts === undefined ? '' : parts.length === 1 && reply.usesToolResults !== true ? parts[0] : undefined
    const calls: ContentBlock[] = reply.calls.map((call) => ({ type: 'tool-call', id: '', name: call.name, args: call.args }))
    fixed = { text, pieces: text === undefined ? undefined : splitText(text), callChars: charsOfContent(calls) }
    fixedParts.set(reply, fixed)
  }
  return fixed
}

/**
 * A call's arguments, copied. Script arguments are JSON values (from YAML or JSON, or an
 * inline script's literals), which a plain walk copies several times faster than
 * `structuredClone`; anything else (a `Date` in an inline script) still goes through it.
 */
function copyArgs(args: Record<string, unknown>): Record<string, unknown> {
  return copyValue(args) as Record<string, unknown>
}

function copyValue(value: unknown): unknown {
  if (typeof value !== 'object' || value === null) return value
  if (Array.isArray(value)) return value.map(copyValue)
  if (Object.getPrototypeOf(value) !== Object.prototype) return structuredClone(value)
  const copy: Record<string, unknown> = {}
  for (const key of Object.keys(value)) copy[key] = copyValue((value as Record<string, unknown>)[key])
  return copy
}

function replyText(reply: CompiledReply, request: LlmRequest): string {
  const parts = reply.textParts
  if (!parts) return ''
  const text = parts.length === 1 ? parts[0] : parts.join(lastToolResultText(request.messages))
  return reply.usesToolResults ? text.split(TOOL_RESULTS).join(stepToolResultsText(request.messages)) : text
}

/** Facts for a session nobody can look up: its request's first user text, at depth 0. */
function factsFromRequest(request: LlmRequest): SessionFacts {
  for (const message of request.messages) if (message.role === 'user') return { ownPrompt: textOf(message.content), delegationDepth: 0 }
  return { ownPrompt: '', delegationDepth: 0 }
}

function noReply(code: ScriptErrorCode, sessionId: string, facts: SessionFacts, why: string): ScriptError {
  const prompt = facts.ownPrompt.length > 80 ? `${facts.ownPrompt.slice(0, 80)}…` : facts.ownPrompt
  return new ScriptError(code, `scripted model: no reply for session ${sessionId} (prompt ${JSON.stringify(prompt)}, depth ${facts.delegationDepth}): ${why}`)
}
