import { Context, Service } from 'cordis'
import Schema from 'schemastery'
import { BashError } from './errors.js'
import { LocalBashExecutor } from './local.js'
import { sandboxRequestProblem } from './sandbox.js'
import type { BashExecutor, BashProcess, BashRequest, BashResult, BashRouter } from './types.js'

declare module 'cordis' {
  interface Context {
    bash: BashService
  }
}

/**
 * `ctx.bash`: the bash executor seam. Exactly one executor runs every command of a
 * context (this machine by default, confined by bubblewrap when a request asks for a
 * sandbox; a remote host by replacing it), so a deployment can never run some commands
 * here and some there by accident.
 */
export class BashService extends Service {
  static Config: Schema<BashService.Config> = Schema.object({
    executor: Schema.union(['local', 'none'] as const).default('local').description('`local`: run commands on this machine; `none`: another plugin registers the executor.'),
    killGraceMs: Schema.natural().default(2_000).description('Local executor: SIGTERM → SIGKILL grace when a command is stopped.'),
    maxOutputChars: Schema.natural().min(1_000).default(30_000).description('Local executor: most output characters kept per command (head and tail).'),
    passEnv: Schema.array(Schema.string().min(1)).default([]).description('Local executor: variables of dsh\'s environment commands see besides the base (PATH, HOME, locale, terminal, temp dirs), by exact name.'),
  })

  private current: BashExecutor | undefined
  /** Most recent last; the first (from the end) that picks an executor runs the request. */
  private routers: BashRouter[] = []

  constructor(ctx: Context, public config: BashService.Config) {
    super(ctx, 'bash')
    if (config.executor === 'local') {
      const local = new LocalBashExecutor({ killGraceMs: config.killGraceMs, maxOutputChars: config.maxOutputChars, passEnv: config.passEnv })
      this.registerExecutor(local)
      // Unloading stops what is still running: no command outlives the seam that started it.
      ctx.effect(() => () => local.stopAll(), 'bash: stop running commands')
    }
  }

  /** Install the executor; a second one while the first is registered throws `DUPLICATE_EXECUTOR`. An effect. */
  registerExecutor(executor: BashExecutor): () => void {
    if (this.current) {
      throw new BashError('DUPLICATE_EXECUTOR', `a bash executor ("${this.current.name}") is already registered; load "${executor.name}" with @dsh/bash configured as executor: none`)
    }
    return this.ctx.effect(() => {
      this.current = executor
      return () => {
        if (this.current === executor) this.current = undefined
      }
    }, `bash.registerExecutor(${JSON.stringify(executor.name)})`)
  }

  /**
   * Let `router` send some requests to another executor (it returns `undefined` for the
   * rest, which the registered executor runs). A sandboxed request is held to the chosen
   * executor's `sandboxProblem()` like any other. An effect of the calling context.
   */
  addRouter(router: BashRouter): () => void {
    return this.ctx.effect(() => {
      this.routers = [...this.routers, router]
      return () => {
        this.routers = this.routers.filter((entry) => entry !== router)
      }
    }, 'bash.addRouter()')
  }

  /** The registered executor, if any. */
  get executor(): BashExecutor | undefined {
    return this.current
  }

  /** Start a command on the executor. */
  start(request: BashRequest): BashProcess {
    if (typeof request.command !== 'string' || !request.command.trim()) throw new BashError('INVALID_REQUEST', 'a command must be non-empty text')
    if (request.command.includes('\0')) throw new BashError('INVALID_REQUEST', 'a command cannot contain NUL characters')
    if (request.timeoutMs !== undefined && !(request.timeoutMs > 0)) throw new BashError('INVALID_REQUEST', `timeoutMs must be positive (got ${request.timeoutMs})`)
    const executor = this.routed(request) ?? this.current
    if (!executor) throw new BashError('NO_EXECUTOR', 'no bash executor is registered: load @dsh/bash (executor: local) or an executor plugin')
    if (request.sandbox !== undefined) {
      const malformed = sandboxRequestProblem(request.sandbox)
      if (malformed !== undefined) throw new BashError('INVALID_REQUEST', malformed)
      // Never a silent fallback: a command that asked to be confined runs confined or not at all.
      const problem = problemOf(executor)
      if (problem !== undefined) throw new BashError('SANDBOX_UNAVAILABLE', problem)
    }
    return executor.start(request)
  }

  private routed(request: BashRequest): BashExecutor | undefined {
    for (let index = this.routers.length - 1; index >= 0; index--) {
      const executor = this.routers[index]!(request)
      if (executor !== undefined) return executor
    }
    return undefined
  }

  /**
   * Why the registered executor cannot run sandboxed commands (one line naming what to
   * install or change), or `undefined` when it can. What asks for a sandbox (a tool
   * instance, a definition) calls this at start-up, so a missing bubblewrap refuses it
   * before anything runs.
   */
  sandboxProblem(): string | undefined {
    if (!this.current) return 'no bash executor is registered: load @dsh/bash (executor: local) or an executor plugin'
    return problemOf(this.current)
  }

  /** Run a command to its end: the exit and the retained output. */
  async run(request: BashRequest): Promise<BashResult> {
    const process = this.start(request)
    const exit = await process.exited
    return { ...exit, output: process.output() }
  }
}

function problemOf(executor: BashExecutor): string | undefined {
  if (!executor.sandboxProblem) return `the bash executor "${executor.name}" cannot run sandboxed commands`
  return executor.sandboxProblem()
}

export namespace BashService {
  export interface Config {
    executor: 'local' | 'none'
    killGraceMs: number
    maxOutputChars: number
    passEnv: string[]
  }
}
