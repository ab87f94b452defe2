/**
 * A dsh A2A worker in the test's own process: a real harness playing a script behind the
 * real `dsh a2a serve` server (`serveA2a`) on 127.0.0.1, with every session it created.
 * Its own entry (`@dsh/testkit/a2a`): only tests that serve A2A load the A2A SDK.
 */
import { serveA2a, type A2aServer, type A2aServerOptions } from '@dsh/a2a-server'
import type { Script } from '@dsh/llm-scripted'
import type { Session } from '@dsh/session'
import { createHarness, type Harness } from './harness.js'

export interface A2aWorker {
  harness: Harness
  server: A2aServer
  /** Every session the worker created, in order. */
  sessions: Session[]
  dispose(): Promise<void>
}

/** `prepare` loads what the worker needs before it serves (the approval broker, tools), which the server reads at start. */
export async function startA2aWorker(script: Script, options: A2aServerOptions = {}, prepare?: (harness: Harness) => Promise<void>): Promise<A2aWorker> {
  const harness = await createHarness({ script })
  const sessions: Session[] = []
  harness.ctx.sessions.addObserver({ created: (session) => void sessions.push(session) })
  await prepare?.(harness)
  const server = await serveA2a(harness.ctx, options)
  return {
    harness,
    server,
    sessions,
    dispose: async () => {
      await server.close()
      await harness.dispose()
    },
  }
}
