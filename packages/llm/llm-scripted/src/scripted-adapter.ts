import { resolve } from 'node:path'
import { LlmError, textOf, type LlmAdapter, type LlmChunk, type LlmRequest, type ToolCallBlock } from '@dsh/llm'
import { abortableDelay, throwIfAborted } from './abortable-delay.js'
import { compileScript, TOOL_RESULTS } from './compile-script.js'
import { ScriptError, type ScriptErrorCode } from './errors.js'
import { estimateInputTokens, outputTokensOf } from './estimate-tokens.js'
import { lastToolResultText, stepToolResultsText } from './last-tool-result.js'
import type { CompiledReply, CompiledRule, CompiledScript, Script } from './script.js'
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
  /** Inline scripts by name, each resolved once: a request costs no key built anew. */
  private inline = new Map<string, ResolvedScript>()
  private files: ScriptFileCache
  private sessions: SessionBindings
  private callCount = 0
  private requests = 0
  private readonly sessionFacts: ((sessionId: string) => SessionFacts | undefined) | undefined

  constructor(options: ScriptedAdapterOptions = {}) {
    this.name = options.name ?? 'scripted'
    for (const [name, script] of Object.entries(options.scripts ?? {})) {
      this.inline.set(name, { key: `inline:${name}`, script: compileScript(script, `inline script ${JSON.stringify(name)}`) })
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
    return new ReplyStream(this, request)
  }

  /**
   * Count the request and pick its reply; a promise only when a script file must be read
   * or the reply waits. Called by a stream at its first `next()`; not for other callers.
   * @internal
   */
  prepareReply(request: LlmRequest): LlmChunk[] | Promise<LlmChunk[]> {
    this.requests++
    throwIfAborted(request.signal)
    const inline = this.inline.get(request.model)
    if (inline) return this.answer(inline, request)
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
    if (inline) return inline
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
      const rule = firstMatchingRule(script, facts)
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
   * The reply's chunks, in the order the README states, built as one array (not a
   * generator spread into one). What does not depend on the request (the split of a fixed
   * text, the size of the calls) was worked out when the script was compiled.
   */
  private play(reply: CompiledReply, request: LlmRequest): LlmChunk[] {
    const text = reply.fixedText ?? replyText(reply, request)
    const pieces = reply.fixedPieces ?? splitText(text)
    const chunks: LlmChunk[] = []
    for (const piece of pieces) chunks.push({ type: 'text-delta', text: piece })
    for (const call of reply.calls) {
      // A copy per request: consumers may fill in defaults on the arguments they receive.
      const block: ToolCallBlock = { type: 'tool-call', id: `call_${++this.callCount}`, name: call.name, args: copyArgs(call.args) }
      chunks.push({ type: 'tool-call', call: block })
    }
    const usage = { inputTokens: estimateInputTokens(request.system, request.messages), outputTokens: outputTokensOf(text.length, reply.callChars) }
    chunks.push({ type: 'usage', usage })
    chunks.push({ type: 'finish', reason: reply.finish ?? (reply.calls.length > 0 ? 'tool-calls' : 'stop') })
    return chunks
  }
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

/**
 * One request's stream. A class, so the methods live on the prototype: an object literal
 * with closures would make four functions per request, which a fan-out pays per child.
 */
class ReplyStream implements AsyncIterableIterator<LlmChunk> {
  private chunks: LlmChunk[] | undefined
  private failed = false
  private index = 0

  constructor(
    private readonly adapter: ScriptedAdapter,
    private readonly request: LlmRequest,
  ) {}

  next(): Promise<IteratorResult<LlmChunk, undefined>> {
    if (this.chunks !== undefined || this.failed) return Promise.resolve(this.step())
    let prepared: LlmChunk[] | Promise<LlmChunk[]>
    try {
      prepared = this.adapter.prepareReply(this.request)
    } catch (error) {
      this.failed = true
      return Promise.reject(error)
    }
    if (Array.isArray(prepared)) {
      this.chunks = prepared
      return Promise.resolve(this.step())
    }
    return prepared.then(
      (ready) => {
        this.chunks = ready
        return this.step()
      },
      (error: unknown) => {
        this.failed = true
        throw error
      },
    )
  }

  return(): Promise<IteratorResult<LlmChunk, undefined>> {
    this.chunks = []
    return Promise.resolve({ done: true, value: undefined })
  }

  [Symbol.asyncIterator](): AsyncIterableIterator<LlmChunk> {
    return this
  }

  private step(): IteratorResult<LlmChunk, undefined> {
    const chunks = this.chunks
    return chunks !== undefined && this.index < chunks.length ? { done: false, value: chunks[this.index++] } : { done: true, value: undefined }
  }
}

function replyText(reply: CompiledReply, request: LlmRequest): string {
  const parts = reply.textParts
  if (!parts) return ''
  const text = parts.length === 1 ? parts[0] : parts.join(lastToolResultText(request.messages))
  return reply.usesToolResults ? text.split(TOOL_RESULTS).join(stepToolResultsText(request.messages)) : text
}

/** The rule a session with `facts` is bound to: the first whose conditions all hold. */
function firstMatchingRule(script: CompiledScript, facts: SessionFacts): CompiledRule | undefined {
  for (const rule of script.rules) {
    if (rule.depth !== undefined && rule.depth !== facts.delegationDepth) continue
    if (rule.prompt !== undefined && !rule.prompt.test(facts.ownPrompt)) continue
    return rule
  }
  return undefined
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
