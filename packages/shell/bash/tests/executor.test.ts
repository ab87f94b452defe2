import { readFileSync } from 'node:fs'
import { mkdtemp, rm } from 'node:fs/promises'
import { tmpdir } from 'node:os'
import { join } from 'node:path'
import { afterEach, describe, expect, it } from 'vitest'
import { Context, type Fiber } from 'cordis'
import { BashService, type BashExecutor, type BashProcess } from '@dsh/bash'
import { exists } from '@dsh/testkit'

let ctx: Context
let fiber: Fiber | undefined
let dir: string | undefined

afterEach(async () => {
  await fiber?.dispose()
  fiber = undefined
  if (dir) await rm(dir, { recursive: true, force: true })
  dir = undefined
})

async function setup(config: Partial<BashService.Config> = {}) {
  ctx = new Context()
  fiber = await ctx.plugin(BashService, config as BashService.Config)
  return ctx.bash
}


/**
 * A grandchild whose shell died first is re-parented to PID 1; an init that never reaps
 * (as in some containers) leaves it a zombie, which has exited and holds nothing.
 */
function running(pid: number): boolean {
  if (!exists(pid)) return false
  const stat = readFileSync(`/proc/${pid}/stat`, 'utf8')
  return stat.slice(stat.lastIndexOf(')') + 2)[0] !== 'Z'
}

/** Pids the command printed as `child=<pid>`. */
function childPids(proc: BashProcess): number[] {
  return [...proc.output().matchAll(/child=(\d+)/g)].map((match) => Number(match[1]))
}

async function untilOutput(proc: BashProcess, pattern: RegExp): Promise<void> {
  const deadline = Date.now() + 5_000
  while (!pattern.test(proc.output())) {
    if (Date.now() > deadline) throw new Error(`no ${pattern} in output: ${proc.output()}`)
    await new Promise((resolve) => setTimeout(resolve, 10))
  }
}

describe('the local executor', () => {
  it('runs bash -c in the given cwd with stdout and stderr together, and reports the exit code', async () => {
    const bash = await setup()
    dir = await mkdtemp(join(tmpdir(), 'dsh-bash-'))
    const result = await bash.run({ command: 'pwd; echo oops >&2; exit 3', cwd: dir })
    expect(result).toMatchObject({ exitCode: 3, signal: null, timedOut: false, stopped: false, leftovers: false })
    expect(result.output).toContain(dir)
    expect(result.output).toContain('oops')
  })

  it('commands see the base environment and what passEnv names, never the rest of dsh\'s environment', async () => {
    const planted = { DSH_TEST_API_KEY: 'sk-secret', DATABASE_URL: 'postgres://u:pw@db/app', GH_PAT: 'ghp_x', DSH_TEST_SHARED: 'shared', DSH_TEST_PLAIN: 'plain' }
    const saved = Object.fromEntries(Object.keys(planted).map((name) => [name, process.env[name]]))
    Object.assign(process.env, planted)
    try {
      const bash = await setup({ passEnv: ['DSH_TEST_SHARED'] })
      const result = await bash.run({ command: 'echo "key=[$DSH_TEST_API_KEY] db=[$DATABASE_URL] pat=[$GH_PAT] shared=[$DSH_TEST_SHARED] plain=[$DSH_TEST_PLAIN] home=[$HOME] path=[${PATH:+set}]"', cwd: tmpdir() })
      expect(result.output.trim()).toBe(`key=[] db=[] pat=[] shared=[shared] plain=[] home=[${process.env.HOME}] path=[set]`)
    } finally {
      for (const [name, value] of Object.entries(saved)) {
        if (value === undefined) delete process.env[name]
        else process.env[name] = value
      }
    }
  })

  it('a timeout stops the whole process tree', async () => {
    const bash = await setup()
    const started = Date.now()
    const proc = bash.start({ command: 'sleep 30 & echo child=$!; sleep 30', cwd: process.cwd(), timeoutMs: 300 })
    await untilOutput(proc, /child=\d+/)
    const exit = await proc.exited
    expect(exit).toMatchObject({ timedOut: true, stopped: true, exitCode: null })
    expect(Date.now() - started).toBeLessThan(5_000)
    expect(exists(proc.pid!)).toBe(false)
    const [child] = childPids(proc)
    expect(running(child)).toBe(false)
  })

  it('a tree that ignores SIGTERM is killed with SIGKILL after the grace period', async () => {
    const bash = await setup({ killGraceMs: 200 })
    const proc = bash.start({ command: 'trap "" TERM; sleep 30 & echo child=$!; while true; do sleep 0.05; done', cwd: process.cwd() })
    await untilOutput(proc, /child=\d+/)
    const stopping = Date.now()
    const exit = await proc.stop()
    expect(Date.now() - stopping).toBeGreaterThanOrEqual(190)
    expect(exit).toMatchObject({ stopped: true, signal: 'SIGKILL' })
    expect(exists(proc.pid!)).toBe(false)
    expect(running(childPids(proc)[0])).toBe(false)
  })

  it('processes a finished command left behind are stopped, and the exit says so', async () => {
    const bash = await setup()
    const proc = bash.start({ command: 'sleep 30 & echo child=$!', cwd: process.cwd() })
    const exit = await proc.exited
    expect(exit).toMatchObject({ exitCode: 0, leftovers: true, stopped: false })
    expect(running(childPids(proc)[0])).toBe(false)
  })

  it('aborting the request signal stops the command', async () => {
    const bash = await setup()
    const controller = new AbortController()
    const proc = bash.start({ command: 'sleep 30', cwd: process.cwd(), signal: controller.signal })
    setTimeout(() => controller.abort(), 50)
    expect(await proc.exited).toMatchObject({ stopped: true, timedOut: false })
    expect(exists(proc.pid!)).toBe(false)
  })

  it('a command that cannot start reports why instead of throwing', async () => {
    const bash = await setup()
    const result = await bash.run({ command: 'echo hi', cwd: '/no/such/dir' })
    expect(result.exitCode).toBeNull()
    expect(result.error).toMatch(/ENOENT/)
  })

  it('bounds captured output to head and tail', async () => {
    const bash = await setup({ maxOutputChars: 3_000 })
    const result = await bash.run({ command: 'seq 1 20000', cwd: process.cwd() })
    const full = Array.from({ length: 20000 }, (_, index) => `${index + 1}\n`).join('')
    const dropped = full.length - 3_000
    expect(result.output.startsWith('1\n2\n3\n')).toBe(true)
    expect(result.output.endsWith('19999\n20000\n')).toBe(true)
    expect(result.output).toContain(`[... ${dropped} characters of output dropped ...]`)
    expect(result.output.length).toBeLessThan(3_100)
  })

  it('unloading the service stops every running command', async () => {
    const bash = await setup()
    const proc = bash.start({ command: 'sleep 30', cwd: process.cwd() })
    await fiber!.dispose()
    fiber = undefined
    expect(await proc.exited).toMatchObject({ stopped: true })
    expect(exists(proc.pid!)).toBe(false)
  })
})

describe('the executor seam', () => {
  const fake: BashExecutor = { name: 'fake', start: () => { throw new Error('not used') } }

  it('holds exactly one executor: a second registration throws', async () => {
    const bash = await setup()
    expect(() => bash.registerExecutor(fake)).toThrow(expect.objectContaining({ code: 'DUPLICATE_EXECUTOR', message: expect.stringContaining('executor: none') }))
    expect(bash.executor?.name).toBe('local')
  })

  it('with executor: none another plugin provides it, and without one start fails loudly', async () => {
    const bash = await setup({ executor: 'none' })
    expect(() => bash.start({ command: 'true', cwd: '/' })).toThrow(expect.objectContaining({ code: 'NO_EXECUTOR' }))
    const unregister = bash.registerExecutor(fake)
    expect(bash.executor).toBe(fake)
    unregister()
    expect(bash.executor).toBeUndefined()
  })

  it('rejects an empty command or a non-positive timeout', async () => {
    const bash = await setup()
    expect(() => bash.start({ command: '  ', cwd: '/' })).toThrow(expect.objectContaining({ code: 'INVALID_REQUEST' }))
    expect(() => bash.start({ command: 'true', cwd: '/', timeoutMs: 0 })).toThrow(expect.objectContaining({ code: 'INVALID_REQUEST' }))
  })
})
