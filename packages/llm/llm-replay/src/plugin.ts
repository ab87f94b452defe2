import { symbols, type Context } from 'cordis'
import Schema from 'schemastery'
// For the `ctx.llm` and `ctx.sessions` declarations on cordis's Context.
import type {} from '@dsh/llm'
import type { SessionStore } from '@dsh/session'
import { Lineage, type SessionFacts } from './lineage.js'
import { Recorder } from './recorder.js'
import { ReplayAdapter } from './replayer.js'
import { SessionIdMask } from './session-ids.js'

/**
 * Registers the `replay` adapter (`replay:DIR`). When the default model is a replay spec,
 * every model resolves to it (a child configured with another model replays too: nothing
 * reaches a real model). With `record: DIR`, every resolved model is wrapped and each
 * session's calls are recorded in DIR.
 */
export class ReplayPlugin {
  static inject = ['llm']
  static Config: Schema<ReplayPlugin.Config> = Schema.object({
    name: Schema.string().default('replay').description('Adapter name: the prefix of model specs (`replay:DIR`).'),
    record: Schema.string().description('Record every session\'s model calls into this directory (one JSONL file per session).'),
    lineageRoot: Schema.string()
      .pattern(/^[A-Za-z0-9_-]+(\.[A-Za-z0-9_-]+)*$/)
      .default('root')
      .description('Lineage key of this process\'s root session (a child process is given its parent\'s lineage).'),
  })

  readonly adapter: ReplayAdapter
  readonly recorder: Recorder | undefined

  constructor(ctx: Context, config: ReplayPlugin.Config) {
    const { facts, liveSessionIds } = sessionLookups(ctx)
    const lineage = new Lineage(facts, config.lineageRoot ?? 'root')
    const ids = new SessionIdMask(lineage, liveSessionIds)
    const name = config.name ?? 'replay'
    this.adapter = new ReplayAdapter(name, lineage, facts, ids)
    ctx.llm.registerAdapter(this.adapter)
    const defaultSpec = ctx.llm.config.model
    if (defaultSpec?.startsWith(`${name}:`)) {
      const dir = defaultSpec.slice(name.length + 1)
      ctx.llm.intercept((resolved) => (resolved.adapter === this.adapter ? resolved : { adapter: this.adapter, model: dir, spec: resolved.spec }))
    }
    if (config.record !== undefined) {
      const recorder = new Recorder(config.record, lineage, facts, ids)
      this.recorder = recorder
      ctx.llm.intercept((resolved) => ({ ...resolved, adapter: recorder.wrap(resolved.adapter) }))
    }
  }
}

export namespace ReplayPlugin {
  export interface Config {
    name?: string
    record?: string
    lineageRoot?: string
  }
}

/** A session's header and own prompt, and the ids of live sessions, from `ctx.sessions` (looked up again when the service changes). */
function sessionLookups(ctx: Context): { facts: (sessionId: string) => SessionFacts | undefined; liveSessionIds: () => string[] } {
  let sessions: SessionStore | undefined
  let resolved = false
  ctx.on('internal/service', (name) => {
    if (name === 'sessions') resolved = false
  })
  const store = () => {
    if (!resolved) {
      const service = ctx.get('sessions')
      // The object behind Cordis's tracing proxy: looked up on every model request.
      sessions = service && (((service as unknown as Record<symbol, unknown>)[symbols.original] as SessionStore | undefined) ?? service)
      resolved = true
    }
    return sessions
  }
  return {
    facts: (sessionId) => {
      const session = store()?.get(sessionId)
      return session && { header: session.header, ownPrompt: session.ownPrompt ?? '' }
    },
    liveSessionIds: () => store()?.list().map((session) => session.id) ?? [],
  }
}
