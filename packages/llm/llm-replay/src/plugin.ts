import { symbols, type Context } from 'cordis'
import Schema from 'schemastery'
// For the `ctx.llm` and `ctx.sessions` declarations on cordis's Context.
import type {} from '@dsh/llm'
import type {} from '@dsh/approvals'
import type { SessionStore } from '@dsh/session'
import { Lineage, type SessionFacts } from './lineage.js'
import { resolve } from 'node:path'
import { RecordingError } from './errors.js'
import { RecordingRouter, type DefaultLink } from './router.js'
import { ReplayAdapter } from './replayer.js'
import { SessionIdMask } from './session-ids.js'

/**
 * Registers the `replay` adapter (`replay:DIR`) and wraps every resolved adapter with the
 * recording router: when the default model is a replay spec, every request of the run is
 * answered by the replay (a child configured with another model too: nothing reaches a
 * real model); with `record: DIR`, each session's calls are recorded in DIR; an ACP
 * session whose parent records or replays (`ctx.llm.adoptRecordingLink`) does the same.
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
  readonly router: RecordingRouter

  constructor(ctx: Context, config: ReplayPlugin.Config) {
    const { facts, liveSessionIds } = sessionLookups(ctx)
    const name = config.name ?? 'replay'
    const defaultSpec = ctx.llm.config.model
    if (defaultSpec?.startsWith(`${name}:`) && config.record !== undefined) {
      throw new RecordingError('INVALID_RECORDING', `record (${config.record}) and a replayed model (${defaultSpec}) exclude each other: a replay is already a recording; drop one of them`)
    }
    const defaultLink: DefaultLink | undefined = defaultSpec?.startsWith(`${name}:`)
      ? { mode: 'replay', dir: resolve(defaultSpec.slice(name.length + 1)) }
      : config.record !== undefined
        ? { mode: 'record', dir: resolve(config.record) }
        : undefined
    // The router and the lineage need each other: the lineage asks for keys given from
    // outside, the router names children by lineage.
    let router: RecordingRouter | undefined
    const lineage = new Lineage(facts, config.lineageRoot ?? 'root', (sessionId) => router?.assignedKey(sessionId))
    const ids = new SessionIdMask(lineage, liveSessionIds)
    this.adapter = new ReplayAdapter(name, lineage, facts, ids)
    router = new RecordingRouter(lineage, facts, ids, this.adapter, defaultLink)
    this.router = router
    ctx.llm.registerAdapter(this.adapter)
    const installed = router
    ctx.llm.intercept((resolved) => ({ ...resolved, adapter: installed.wrap(resolved.adapter) }))
    ctx.llm.registerRecording(installed)
    // The approval broker's decisions are part of the run: recorded beside the model calls
    // of the session that asked, and answered from them in a replay, nobody asked.
    ctx.inject(['approvals'], (withBroker) => {
      withBroker.approvals.addRecorder({
        replay: (request, session) => installed.approval(session, request.tool, request.subject),
        record: (request, session, decision) => {
          installed.approval(session, request.tool, request.subject, decision)
        },
      })
    })
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
