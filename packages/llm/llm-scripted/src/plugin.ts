import { symbols, type Context } from 'cordis'
import Schema from 'schemastery'
// For their `ctx.llm` and `ctx.sessions` declarations on cordis's Context.
import type {} from '@dsh/llm'
import type { SessionStore } from '@dsh/session'
import type { Script } from './script.js'
import { ScriptedAdapter } from './scripted-adapter.js'

/**
 * Registers a `ScriptedAdapter` on `ctx.llm`. The registration is an effect of this
 * plugin's fiber, so disposing the plugin unregisters the adapter.
 */
export class ScriptedPlugin {
  static inject = ['llm']
  static Config: Schema<ScriptedPlugin.Config> = Schema.object({
    name: Schema.string().default('scripted').description('Adapter name: the prefix of model specs (`scripted:./demo.yml`).'),
    scripts: Schema.dict(Schema.any<Script>())
      .default({})
      .description('Inline scripts by name; `scripted:NAME` plays one before looking for a file NAME.'),
    maxSessions: Schema.natural().min(1).default(10_000).description('Most sessions whose reply cursors are kept (least recently used dropped first).'),
  })

  readonly adapter: ScriptedAdapter

  constructor(ctx: Context, config: ScriptedPlugin.Config) {
    // Rules match on the session's own prompt and depth, read from the session itself. The
    // store is looked up once and held (as the object behind Cordis's tracing proxy, which
    // costs microseconds per call on a path every delegated child takes), and looked up
    // again whenever a sessions service comes or goes.
    let sessions: SessionStore | undefined
    let resolved = false
    ctx.on('internal/service', (name) => {
      if (name === 'sessions') resolved = false
    })
    const store = (): SessionStore | undefined => {
      if (!resolved) {
        const service = ctx.get('sessions')
        sessions = service && (((service as unknown as Record<symbol, unknown>)[symbols.original] as SessionStore | undefined) ?? service)
        resolved = true
      }
      return sessions
    }
    this.adapter = new ScriptedAdapter({
      ...config,
      sessionFacts: (sessionId) => {
        const session = store()?.get(sessionId)
        if (!session) return undefined
        // A resumed session continues its rule where its log left off. Every step makes one
        // model request, which consumed one reply (an aborted or failed one too); the
        // request being bound is the latest step's own.
        let steps = 0
        for (const event of session.ownEvents()) if (event.type === 'step/start') steps++
        const earlierReplies = Math.max(0, steps - 1)
        return { ownPrompt: session.ownPrompt ?? '', delegationDepth: session.header.delegationDepth ?? 0, earlierReplies }
      },
    })
    ctx.llm.registerAdapter(this.adapter)
    // A released session makes no more requests: its binding goes with it, so the map holds
    // the live sessions rather than the last ten thousand (a resumed one is bound again, its
    // cursor placed after the replies its log already holds).
    ctx.inject(['sessions'], (withSessions) => {
      withSessions.sessions.addObserver({ released: (session) => void this.adapter.forget(session.id) })
    })
  }
}

export namespace ScriptedPlugin {
  export interface Config {
    name?: string
    scripts?: Record<string, Script>
    maxSessions?: number
  }
}
