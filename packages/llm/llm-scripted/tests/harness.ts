import { mkdtempSync, rmSync, writeFileSync } from 'node:fs'
import { tmpdir } from 'node:os'
import { join } from 'node:path'
import { Context } from 'cordis'
import { historyOf, LlmService, userText, type LlmChunk, type LlmRequest, type Message } from '@dsh/llm'
import { SessionStore } from '@dsh/session'
import ScriptedPlugin from '../src/index.js'

export interface RequestFacts {
  sessionId?: string
  prompt?: string
  depth?: number
  messages?: Message[]
  signal?: AbortSignal
  system?: string
}

export function requestFor(model: string, facts: RequestFacts = {}): LlmRequest {
  const prompt = facts.prompt ?? 'hello'
  return {
    model,
    system: facts.system ?? 'You are a test model.',
    messages: historyOf(facts.messages ?? [{ role: 'user', content: [{ type: 'text', text: prompt }] }]),
    tools: [],
    signal: facts.signal ?? new AbortController().signal,
    origin: { sessionId: facts.sessionId ?? 'session-1' },
  }
}

export async function collect(stream: AsyncIterable<LlmChunk>): Promise<LlmChunk[]> {
  const chunks: LlmChunk[] = []
  for await (const chunk of stream) chunks.push(chunk)
  return chunks
}

export function textOfChunks(chunks: readonly LlmChunk[]): string {
  return chunks.map((chunk) => (chunk.type === 'text-delta' ? chunk.text : '')).join('')
}

/**
 * A real Context with the real LlmService, a real session store, and the scripted plugin
 * holding `scripts` inline. The plugin reads a session's prompt and depth from the store.
 */
export async function scriptedContext(config: ScriptedPlugin.Config = {}) {
  const ctx = new Context()
  await ctx.plugin(LlmService)
  await ctx.plugin(SessionStore)
  const fiber = await ctx.plugin(ScriptedPlugin, config)
  /**
   * Stream one request for `spec` (e.g. `scripted:demo`) through `ctx.llm.resolve`, as the
   * session `facts.sessionId`; a session asked for the first time is created with
   * `facts.depth` and `facts.prompt` as its first own message.
   */
  const ask = (spec: string, facts: RequestFacts = {}) => {
    const sessionId = facts.sessionId ?? 'session-1'
    if (!ctx.sessions.get(sessionId)) {
      const session = ctx.sessions.create({ id: sessionId, delegationDepth: facts.depth ?? 0 })
      session.append({ type: 'user/message', message: userText(facts.prompt ?? 'hello') })
    }
    const { adapter, model } = ctx.llm.resolve(spec)
    return collect(adapter.stream(requestFor(model, facts)))
  }
  return { ctx, fiber, ask }
}

const tempDirs: string[] = []

/** Write `text` to a fresh temporary directory; `removeTempScripts()` deletes them all. */
export function tempScript(fileName: string, text: string): string {
  const dir = mkdtempSync(join(tmpdir(), 'llm-scripted-'))
  tempDirs.push(dir)
  const path = join(dir, fileName)
  writeFileSync(path, text)
  return path
}

export function removeTempScripts(): void {
  for (const dir of tempDirs.splice(0)) rmSync(dir, { recursive: true, force: true })
}
