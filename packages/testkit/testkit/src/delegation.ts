/**
 * The set-up delegation tests share: the harness of `./harness.ts` with the subagent seam
 * (`ctx.subagents`), the one registry of owned work (`ctx.tasks`, which delivers notices
 * and knows when an agent is quiet) and, unless a test asks for none, the real JSONL
 * session store in a temporary directory (continuable children must be reachable after a
 * restart). Providers and tools load beside them.
 */
import { mkdtemp, rm } from 'node:fs/promises'
import { tmpdir } from 'node:os'
import { join } from 'node:path'
import type { Agent } from '@dsh/agent'
import type { LlmRequest } from '@dsh/llm'
import SessionJsonl from '@dsh/session-jsonl'
import { SubagentService } from '@dsh/subagent'
import { TaskService } from '@dsh/tasks'
import { createHarness, type Harness, type HarnessOptions } from './harness.js'

export { endOf, listenToChildren, textOf, updatesAsSent, updatesOf, type Heard } from './child-events.js'

/** A plugin to load, alone or with its config. */
export type PluginSpec = unknown | readonly [plugin: unknown, config: unknown]

export interface DelegationHarnessOptions extends HarnessOptions {
  /** Where session files go: a directory (kept across a `restart`), a fresh temporary one (the default), or `false` for none. */
  sessionDir?: string | false
  /** `ctx.subagents`'s config. */
  subagents?: Partial<SubagentService.Config>
  /** `ctx.tasks`'s config. */
  tasks?: Partial<TaskService.Config>
  /** Providers and tools, loaded in order after the seam and the registry. */
  plugins?: readonly PluginSpec[]
}

export interface DelegationHarness extends Harness {
  /** The session directory, when there is one. */
  readonly dir: string | undefined
  /** Every request the scripted model was sent, in order. */
  readonly requests: LlmRequest[]
  /** Dispose this harness, keeping its session files, and start another over them (a restart). */
  restart(options?: Omit<DelegationHarnessOptions, 'sessionDir'>): Promise<DelegationHarness>
  /** Dispose, then remove the session directory (unless the test gave it). */
  dispose(): Promise<void>
}

export async function createDelegationHarness(options: DelegationHarnessOptions = {}): Promise<DelegationHarness> {
  const made = options.sessionDir === undefined
  const dir = options.sessionDir === false ? undefined : (options.sessionDir ?? (await mkdtemp(join(tmpdir(), 'dsh-delegation-'))))
  const harness = await createHarness(options)
  if (dir !== undefined) await harness.plugin(SessionJsonl, { dir })
  await harness.plugin(TaskService, options.tasks ?? {})
  await harness.plugin(SubagentService, options.subagents ?? {})
  for (const spec of options.plugins ?? []) {
    if (Array.isArray(spec)) await harness.plugin(spec[0], spec[1])
    else await harness.plugin(spec)
  }
  const requests = recordRequests(harness)
  let removeDir = made
  return {
    ...harness,
    dir,
    requests,
    restart: async (again = {}) => {
      removeDir = false
      await harness.dispose()
      const next = await createDelegationHarness({ ...options, ...again, sessionDir: dir ?? false })
      // The last harness over the directory removes it, as the first would have.
      return made ? { ...next, dispose: () => next.dispose().then(() => (dir ? rm(dir, { recursive: true, force: true }) : undefined)) } : next
    },
    dispose: async () => {
      await harness.dispose()
      if (removeDir && dir !== undefined) await rm(dir, { recursive: true, force: true })
    },
  }
}

/** A test's clean-up: dispose `harness` (when there is one), then remove `dir` (when there is one). */
export async function cleanUp(harness: { dispose(): Promise<void> } | undefined, dir?: string): Promise<void> {
  try {
    await harness?.dispose()
  } finally {
    if (dir !== undefined) await rm(dir, { recursive: true, force: true })
  }
}

/** Record every request the scripted adapter streams for. */
export function recordRequests(harness: Harness): LlmRequest[] {
  const requests: LlmRequest[] = []
  const adapter = harness.ctx.llm.getAdapter('scripted')!
  const stream = adapter.stream.bind(adapter)
  adapter.stream = (request) => {
    requests.push(request)
    return stream(request)
  }
  return requests
}

/** Resolves once `agent` has logged `count` turn ends of its own. */
export function turnEnds(agent: Agent, count: number): Promise<void> {
  const ended = () => agent.session.ownEvents().filter((event) => event.type === 'turn/end').length
  if (ended() >= count) return Promise.resolve()
  return new Promise((resolve) => {
    const stop = agent.session.subscribe((update) => {
      if (update.type === 'turn/end' && ended() >= count) {
        stop()
        resolve()
      }
    })
  })
}
