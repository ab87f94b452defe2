import { Context, Service } from 'cordis'
import Schema from 'schemastery'
import type { LlmAdapter } from './adapter.js'
import { LlmRegistryError } from './errors.js'
import { checkPriceTable, type PriceTable } from './pricing.js'

declare module 'cordis' {
  interface Context {
    llm: LlmService
  }
}

export interface ResolvedModel {
  adapter: LlmAdapter
  model: string
  /** The spec as written, for messages and logs. */
  spec: string
}

/** Sees every resolved model and returns what callers get instead (or the same). */
export type ModelInterceptor = (resolved: ResolvedModel) => ResolvedModel

/**
 * How a session's model calls are recorded or replayed, handed across a process boundary
 * (an ACP child of a recorded or replayed parent does the same with its own calls).
 */
export interface RecordingLink {
  mode: 'record' | 'replay'
  /** Absolute directory of the recordings. */
  dir: string
  /** The lineage key of the session the link is for (its recording's name). */
  lineage: string
}

/** What a recording plugin offers `ctx.llm` (see `registerRecording`). */
export interface RecordingLinks {
  /** The link for a child another process runs, started by `callId` of `parentSession`; undefined when the parent is neither recorded nor replayed. */
  childLink(parentSession: string, callId: string | undefined): RecordingLink | undefined
  /** Record or replay `sessionId` (a root of this process) as `link` says, from its first call on. */
  adopt(sessionId: string, link: RecordingLink): void
}

/**
 * `ctx.llm`: a named registry of model adapters. Several adapters coexist; a model spec
 * `adapter:model` picks one. Registration is an effect of the registering plugin.
 */
export class LlmService extends Service {
  static Config: Schema<LlmService.Config> = Schema.object({
    model: Schema.string().description('Default model spec, `adapter:model` (e.g. `deepseek:deepseek-chat`).'),
    prices: Schema.dict(Schema.any()).description('Optional price table: model spec (adapter:model) → { input, output, cacheHitInput?, cacheWriteInput? } per million tokens; turns usage into cost.'),
  })

  private adapters = new Map<string, LlmAdapter>()
  /** The last spec resolved without interceptors, and its answer (see `resolve`). */
  private lastResolved: { wanted: string; resolved: ResolvedModel } | undefined
  private interceptors: ModelInterceptor[] = []
  private recording: RecordingLinks | undefined
  /** The checked price table (empty without one). */
  readonly prices: PriceTable

  constructor(ctx: Context, public config: LlmService.Config = {}) {
    super(ctx, 'llm')
    // Checked at load: a bad entry fails the plugin naming the entry.
    this.prices = checkPriceTable(config.prices)
  }

  /**
   * Price table entries naming an adapter that is not loaded: call once every plugin has
   * started (adapters register after this service). Empty when all are known.
   */
  unknownPricedModels(): string[] {
    return Object.keys(this.prices)
      .filter((spec) => !this.adapters.has(spec.slice(0, spec.indexOf(':'))))
      .map((spec) => `prices["${spec}"] names adapter "${spec.slice(0, spec.indexOf(':'))}", which is not loaded (loaded: ${this.list().join(', ') || 'none'})`)
  }

  registerAdapter(adapter: LlmAdapter): () => void {
    if (this.adapters.has(adapter.name)) {
      throw new LlmRegistryError('DUPLICATE_ADAPTER', `an LLM adapter named "${adapter.name}" is already registered`)
    }
    return this.ctx.effect(() => {
      this.adapters.set(adapter.name, adapter)
      this.lastResolved = undefined
      return () => {
        this.lastResolved = undefined
        if (this.adapters.get(adapter.name) === adapter) this.adapters.delete(adapter.name)
      }
    }, `llm.registerAdapter(${JSON.stringify(adapter.name)})`)
  }

  /**
   * Change what every `resolve` returns (recording wraps the adapter; replay puts itself in
   * place of every model, so no request can reach another one). Interceptors apply in
   * registration order; the registration is an effect of the registering plugin.
   */
  intercept(interceptor: ModelInterceptor): () => void {
    return this.ctx.effect(() => {
      this.interceptors.push(interceptor)
      return () => {
        const index = this.interceptors.indexOf(interceptor)
        if (index >= 0) this.interceptors.splice(index, 1)
      }
    }, 'llm.intercept()')
  }

  /** Install the recording plugin's links (one at a time); an effect of the calling plugin. */
  registerRecording(links: RecordingLinks): () => void {
    if (this.recording) throw new LlmRegistryError('DUPLICATE_ADAPTER', 'a recording plugin is already registered on ctx.llm')
    return this.ctx.effect(() => {
      this.recording = links
      return () => {
        if (this.recording === links) this.recording = undefined
      }
    }, 'llm.registerRecording()')
  }

  /** See `RecordingLinks.childLink`; undefined without a recording plugin. */
  childRecordingLink(parentSession: string, callId: string | undefined): RecordingLink | undefined {
    return this.recording?.childLink(parentSession, callId)
  }

  /**
   * See `RecordingLinks.adopt`. Without a recording plugin it throws `NO_RECORDING`: a
   * session its parent expects to be replayed must never reach a real model instead.
   */
  adoptRecordingLink(sessionId: string, link: RecordingLink): void {
    if (!this.recording) throw new LlmRegistryError('NO_RECORDING', `session ${sessionId} should ${link.mode} its model calls (${link.dir}), but no recording plugin (@dsh/llm-replay) is loaded`)
    this.recording.adopt(sessionId, link)
  }

  getAdapter(name: string): LlmAdapter | undefined {
    return this.adapters.get(name)
  }

  list(): string[] {
    return [...this.adapters.keys()]
  }

  /**
   * Resolve a model spec (`adapter:model`, or `adapter` for its default model) to an
   * adapter. Without a spec, the configured default is used.
   */
  resolve(spec?: string): ResolvedModel {
    const wanted = spec ?? this.config.model
    // Every step of every agent resolves its model, nearly always the same spec as the
    // step before: without interceptors (which may decide anew each time) the last answer is reused.
    const last = this.lastResolved
    if (last !== undefined && last.wanted === wanted && this.interceptors.length === 0) return last.resolved
    if (!wanted) {
      throw new LlmRegistryError('NO_MODEL', 'no model configured: pass --model (e.g. scripted:./script.yml or deepseek:deepseek-chat)')
    }
    const colon = wanted.indexOf(':')
    const name = colon < 0 ? wanted : wanted.slice(0, colon)
    const adapter = this.adapters.get(name)
    if (!adapter) {
      const known = this.list()
      throw new LlmRegistryError('NO_ADAPTER', `model spec "${wanted}" names adapter "${name}", which is not loaded (loaded: ${known.length ? known.join(', ') : 'none'})`)
    }
    const model = colon < 0 ? adapter.defaultModel : wanted.slice(colon + 1)
    if (!model) throw new LlmRegistryError('NO_MODEL', `model spec "${wanted}" names no model and adapter "${name}" has no default`)
    let resolved: ResolvedModel = { adapter, model, spec: wanted }
    if (this.interceptors.length === 0) {
      // Shared by later calls: frozen so that no caller changes another's answer.
      resolved = Object.freeze(resolved)
      this.lastResolved = { wanted, resolved }
      return resolved
    }
    for (const interceptor of this.interceptors) resolved = interceptor(resolved)
    return resolved
  }
}

export namespace LlmService {
  export interface Config {
    model?: string
    prices?: Record<string, unknown>
  }
}
