/**
 * Sandboxed commands under the real bubblewrap: real files, real processes, a real TCP
 * server on 127.0.0.1. These tests need `bwrap` (npm test's preflight installs it) and
 * fail, never skip, without it.
 */
import { execFile } from 'node:child_process'
import { existsSync, readdirSync, readFileSync, readlinkSync, writeFileSync } from 'node:fs'
import { mkdtemp, rm } from 'node:fs/promises'
import { createServer, type AddressInfo } from 'node:net'
import { tmpdir } from 'node:os'
import { dirname, join } from 'node:path'
import { fileURLToPath } from 'node:url'
import { afterEach, beforeAll, describe, expect, it } from 'vitest'
import { Context, type Fiber } from 'cordis'
import { BashService, LocalBashExecutor, sandboxProblem, type BashExecutor, type BashProcess, type BashSandbox } from '@dsh/bash'
import { exists } from '@dsh/testkit'

let ctx: Context
let fiber: Fiber | undefined
const made: string[] = []

afterEach(async () => {
  await fiber?.dispose()
  fiber = undefined
  await Promise.all(made.splice(0).map((path) => rm(path, { recursive: true, force: true })))
})

beforeAll(() => {
  expect(sandboxProblem(), 'these tests run commands under bubblewrap: npm test\'s preflight (scripts/preflight.mjs) installs it').toBeUndefined()
})

async function setup(config: Partial<BashService.Config> = {}) {
  ctx = new Context()
  fiber = await ctx.plugin(BashService, config as BashService.Config)
  return ctx.bash
}

async function tempDir(parent = tmpdir()): Promise<string> {
  const dir = await mkdtemp(join(parent, 'dsh-sandbox-'))
  made.push(dir)
  return dir
}

/** A workspace directory and the sandbox that makes it the only writable place. */
async function workspace(network = false): Promise<{ dir: string; sandbox: BashSandbox }> {
  const dir = await tempDir()
  return { dir, sandbox: { writable: [dir], network } }
}

/** A command prints its PID namespace (`pid:[4026532175]`) with this, which names the sandbox from outside. */
const PRINT_NAMESPACE = 'readlink /proc/self/ns/pid'
const namespaceOf = (proc: BashProcess) => /pid:\[\d+\]/.exec(proc.output())![0]

/** Host pids of the processes running in PID namespace `link` (zombies do not count). */
function runningIn(link: string): number[] {
  const pids: number[] = []
  for (const name of readdirSync('/proc')) {
    if (!/^\d+$/.test(name)) continue
    try {
      if (readlinkSync(`/proc/${name}/ns/pid`) !== link) continue
      const stat = readFileSync(`/proc/${name}/stat`, 'utf8')
      if (stat.slice(stat.lastIndexOf(')') + 2)[0] !== 'Z') pids.push(Number(name))
    } catch {
      // gone between listing and reading
    }
  }
  return pids
}

async function untilOutput(proc: BashProcess, pattern: RegExp): Promise<void> {
  const deadline = Date.now() + 10_000
  while (!pattern.test(proc.output())) {
    if (Date.now() > deadline) throw new Error(`no ${pattern} in output: ${proc.output()}`)
    await new Promise((resolve) => setTimeout(resolve, 10))
  }
}

describe('a sandboxed command and the file system', () => {
  it('writes inside its writable directory, and a write outside fails with the file never created', async () => {
    const bash = await setup()
    const { dir, sandbox } = await workspace()
    // Outside /tmp, so the path is visible inside the sandbox (read-only) rather than hidden by its private /tmp.
    const outside = await tempDir('/var/tmp')
    const command = `echo inside > inside.txt && echo wrote-inside; echo outside > ${outside}/escaped.txt; echo "outside-exit=$?"`
    const result = await bash.run({ command, cwd: dir, sandbox })
    expect(result).toMatchObject({ exitCode: 0, stopped: false })
    expect(result.output).toContain('wrote-inside')
    expect(result.output).toMatch(/escaped\.txt: Read-only file system/)
    expect(result.output).toContain('outside-exit=1')
    expect(readFileSync(join(dir, 'inside.txt'), 'utf8')).toBe('inside\n')
    expect(existsSync(join(outside, 'escaped.txt'))).toBe(false)
    // The same command unconfined does write there: the directory itself was writable.
    await bash.run({ command, cwd: dir })
    expect(readFileSync(join(outside, 'escaped.txt'), 'utf8')).toBe('outside\n')
  })

  it('even as root it cannot make the file system writable again (its capabilities are dropped)', async () => {
    const bash = await setup()
    const { dir, sandbox } = await workspace()
    const outside = await tempDir('/var/tmp')
    const result = await bash.run({ command: `grep CapEff /proc/self/status; mount -o remount,rw / ; mount -o remount,rw ${outside}; touch ${outside}/escaped`, cwd: dir, sandbox })
    expect(result.output).toMatch(/CapEff:\s+0+\n/)
    expect(existsSync(join(outside, 'escaped'))).toBe(false)
  })

  it('has a private /tmp: what it writes there is gone afterwards, and the host\'s /tmp is not visible', async () => {
    const bash = await setup()
    const { dir, sandbox } = await workspace()
    const sibling = await tempDir()
    writeFileSync(join(sibling, 'host-file'), 'host\n')
    const probe = join(tmpdir(), `dsh-sandbox-probe-${process.pid}`)
    const result = await bash.run({ command: `echo probe > ${probe} && echo wrote-tmp; cat ${sibling}/host-file; echo "read-exit=$?"`, cwd: dir, sandbox })
    expect(result.output).toContain('wrote-tmp')
    expect(result.output).toContain('read-exit=1')
    expect(result.output).not.toContain('host\n')
    expect(existsSync(probe)).toBe(false)
  })

  it('keeps readable directories under /tmp visible, read-only; one that does not exist is left out', async () => {
    const bash = await setup()
    const { dir } = await workspace()
    const shared = await tempDir()
    writeFileSync(join(shared, 'data'), 'shared data\n')
    const sandbox: BashSandbox = { writable: [dir], readable: [shared, join(shared, 'no-such-dir')], network: false }
    const result = await bash.run({ command: `cat ${shared}/data; touch ${shared}/written; echo "write-exit=$?"`, cwd: dir, sandbox })
    expect(result.output).toContain('shared data\n')
    expect(result.output).toMatch(/written': Read-only file system\nwrite-exit=1\n$/)
    expect(existsSync(join(shared, 'written'))).toBe(false)
  })

  it('a set-up bubblewrap refuses is reported as refused, with its words, never as the command\'s exit', async () => {
    const bash = await setup()
    const { dir } = await workspace()
    const missing = join(dir, 'no-such-dir')
    const result = await bash.run({ command: 'echo ran', cwd: dir, sandbox: { writable: [missing], network: false } })
    expect(result).toMatchObject({ exitCode: null, refusedBySandbox: true, stopped: false })
    expect(result.error).toBe(`the sandbox refused to run it: bwrap: Can't find source path ${missing}: No such file or directory`)
    expect(result.output).not.toContain('ran')
    // A command that runs and fails is its own failure, not a refusal.
    const failed = await bash.run({ command: 'echo ran; exit 1', cwd: dir, sandbox: { writable: [dir], network: false } })
    expect(failed).toMatchObject({ exitCode: 1, output: 'ran\n' })
    expect(failed.refusedBySandbox).toBeUndefined()
  })
})

describe('a sandboxed command and other processes', () => {
  it('cannot read the environment of the dsh that started it through /proc, which an unconfined command can', async () => {
    const dir = await tempDir()
    const secret = `sk-sandbox-test-${process.pid}-${Date.now()}`
    const fixture = join(dirname(fileURLToPath(import.meta.url)), 'fixtures/environ-parent.mjs')
    // The secret in any environment /proc shows (grep keeps the output small: a busy host's
    // environments would overflow the output bound), then whether dsh's own entry is there at all.
    const command = "for file in /proc/[0-9]*/environ; do tr '\\0' '\\n' < \"$file\"; done 2>/dev/null | grep DSH_TEST_SANDBOX_SECRET=; test -e /proc/{parent} && echo parent-visible || echo parent-absent"
    const stdout = await new Promise<string>((resolve, reject) =>
      execFile(process.execPath, [fixture, dir, command], { env: { ...process.env, DSH_TEST_SANDBOX_SECRET: secret } }, (error, out, err) => (error ? reject(new Error(`${error.message}\n${err}`)) : resolve(out))),
    )
    const { unconfined, sandboxed } = JSON.parse(stdout) as { unconfined: string; sandboxed: string }
    // The threat is real: unconfined, the command reads dsh's key from /proc.
    expect(unconfined).toContain(`DSH_TEST_SANDBOX_SECRET=${secret}`)
    expect(unconfined).toContain('parent-visible')
    expect(sandboxed).not.toContain(secret)
    expect(sandboxed).toContain('parent-absent')
  })

  it('sees only its own processes', async () => {
    const bash = await setup()
    const { dir, sandbox } = await workspace()
    const result = await bash.run({ command: `ls -d /proc/[0-9]* | wc -l; test -e /proc/${process.pid} && echo test-visible || echo test-absent`, cwd: dir, sandbox })
    const [count] = result.output.split('\n')
    // bubblewrap's init, the shell, ls and wc: nothing of the host.
    expect(Number(count)).toBeLessThanOrEqual(4)
    expect(result.output).toContain('test-absent')
  })

  it('gets the same allow-listed environment as an unconfined command', async () => {
    const planted = { DSH_TEST_API_KEY: 'sk-secret', DSH_TEST_SHARED: 'shared' }
    const saved = Object.fromEntries(Object.keys(planted).map((name) => [name, process.env[name]]))
    Object.assign(process.env, planted)
    try {
      const bash = await setup({ passEnv: ['DSH_TEST_SHARED'] })
      const { dir, sandbox } = await workspace()
      const result = await bash.run({ command: 'echo "key=[$DSH_TEST_API_KEY] shared=[$DSH_TEST_SHARED] home=[$HOME] path=[${PATH:+set}]"', cwd: dir, sandbox })
      expect(result.output.trim()).toBe(`key=[] shared=[shared] home=[${process.env.HOME}] path=[set]`)
    } finally {
      for (const [name, value] of Object.entries(saved)) {
        if (value === undefined) delete process.env[name]
        else process.env[name] = value
      }
    }
  })
})

describe('a sandboxed command and the network', () => {
  async function serve() {
    let connections = 0
    const server = createServer((socket) => {
      connections++
      socket.end('hello from the host\n')
    })
    await new Promise<void>((resolve) => server.listen(0, '127.0.0.1', resolve))
    return { port: (server.address() as AddressInfo).port, connections: () => connections, close: () => new Promise((resolve) => server.close(resolve)) }
  }
  // bash's own /dev/tcp: no client program needed.
  const connect = (port: number) => `exec 3<>/dev/tcp/127.0.0.1/${port} && echo connected && cat <&3`

  it('without network cannot connect to a server on the host\'s 127.0.0.1', async () => {
    const server = await serve()
    try {
      const bash = await setup()
      const { dir, sandbox } = await workspace(false)
      const result = await bash.run({ command: connect(server.port), cwd: dir, sandbox })
      expect(result.exitCode).not.toBe(0)
      expect(result.output).not.toContain('connected')
      expect(server.connections()).toBe(0)
    } finally {
      await server.close()
    }
  })

  it('with network connects to it', async () => {
    const server = await serve()
    try {
      const bash = await setup()
      const { dir, sandbox } = await workspace(true)
      const result = await bash.run({ command: connect(server.port), cwd: dir, sandbox })
      expect(result).toMatchObject({ exitCode: 0, output: 'connected\nhello from the host\n' })
      expect(server.connections()).toBe(1)
    } finally {
      await server.close()
    }
  })
})

describe('stopping a sandboxed command', () => {
  it('a timeout stops everything in the sandbox', async () => {
    const bash = await setup()
    const { dir, sandbox } = await workspace()
    const proc = bash.start({ command: `sleep 30 & ${PRINT_NAMESPACE}; sleep 30`, cwd: dir, sandbox, timeoutMs: 300 })
    await untilOutput(proc, /pid:\[\d+\]/)
    const namespace = namespaceOf(proc)
    expect(runningIn(namespace).length).toBeGreaterThan(0)
    const exit = await proc.exited
    expect(exit).toMatchObject({ timedOut: true, stopped: true })
    expect(runningIn(namespace)).toEqual([])
    expect(exists(proc.pid!)).toBe(false)
  })

  it('a cancel reaches the command with SIGTERM first, so it can clean up, and stops everything', async () => {
    const bash = await setup()
    const { dir, sandbox } = await workspace()
    const controller = new AbortController()
    const proc = bash.start({ command: `trap 'echo cleaning-up; exit 9' TERM; sleep 30 & ${PRINT_NAMESPACE}; wait`, cwd: dir, sandbox, signal: controller.signal })
    await untilOutput(proc, /pid:\[\d+\]/)
    const namespace = namespaceOf(proc)
    controller.abort()
    const exit = await proc.exited
    expect(exit).toMatchObject({ stopped: true, timedOut: false, exitCode: 9 })
    expect(proc.output()).toContain('cleaning-up')
    expect(runningIn(namespace)).toEqual([])
  })

  it('a tree that ignores SIGTERM, and a process that left its group, are killed after the grace period', async () => {
    const bash = await setup({ killGraceMs: 200 })
    const { dir, sandbox } = await workspace()
    const proc = bash.start({ command: `trap "" TERM; setsid sleep 30 & sleep 30 & ${PRINT_NAMESPACE}; while true; do sleep 0.05; done`, cwd: dir, sandbox })
    await untilOutput(proc, /pid:\[\d+\]/)
    const namespace = namespaceOf(proc)
    const exit = await proc.stop()
    expect(exit).toMatchObject({ stopped: true, signal: 'SIGKILL' })
    expect(runningIn(namespace)).toEqual([])
    expect(exists(proc.pid!)).toBe(false)
  })

  it('what a finished command left running is gone when its exit resolves', async () => {
    const bash = await setup()
    const { dir, sandbox } = await workspace()
    const proc = bash.start({ command: `sleep 30 & ${PRINT_NAMESPACE}`, cwd: dir, sandbox })
    const exit = await proc.exited
    expect(exit).toMatchObject({ exitCode: 0, stopped: false })
    expect(runningIn(namespaceOf(proc))).toEqual([])
  })

  it('unloading the service stops a sandboxed command', async () => {
    const bash = await setup()
    const { dir, sandbox } = await workspace()
    const proc = bash.start({ command: `${PRINT_NAMESPACE}; sleep 30`, cwd: dir, sandbox })
    await untilOutput(proc, /pid:\[\d+\]/)
    await fiber!.dispose()
    fiber = undefined
    expect(await proc.exited).toMatchObject({ stopped: true })
    expect(runningIn(namespaceOf(proc))).toEqual([])
  })
})

describe('asking for a sandbox where there is none', () => {
  it('without bubblewrap a sandboxed request is refused before anything runs, naming the package; unconfined ones still run', async () => {
    const bash = await setup({ executor: 'none' })
    bash.registerExecutor(new LocalBashExecutor({ killGraceMs: 2_000, maxOutputChars: 30_000, sandboxProgram: '/nonexistent/bwrap' }))
    expect(bash.sandboxProblem()).toBe('sandboxed commands need bubblewrap, which is not installed: install the Debian package bubblewrap (program /nonexistent/bwrap), or turn the sandbox off')
    const { dir, sandbox } = await workspace()
    expect(() => bash.start({ command: `touch ${dir}/ran`, cwd: dir, sandbox })).toThrow(expect.objectContaining({ name: 'BashError', code: 'SANDBOX_UNAVAILABLE', message: expect.stringContaining('Debian package bubblewrap') }))
    expect(existsSync(join(dir, 'ran'))).toBe(false)
    expect(await bash.run({ command: 'echo unconfined', cwd: dir })).toMatchObject({ exitCode: 0, output: 'unconfined\n' })
  })

  it('an executor that cannot confine commands refuses every sandboxed request', async () => {
    const bash = await setup({ executor: 'none' })
    let started = 0
    const remote: BashExecutor = { name: 'remote', start: () => { started++; throw new Error('not reached') } }
    bash.registerExecutor(remote)
    expect(bash.sandboxProblem()).toBe('the bash executor "remote" cannot run sandboxed commands')
    expect(() => bash.start({ command: 'true', cwd: '/', sandbox: { writable: [], network: false } })).toThrow(expect.objectContaining({ code: 'SANDBOX_UNAVAILABLE' }))
    expect(started).toBe(0)
  })

  it('a malformed sandbox is an invalid request', async () => {
    const bash = await setup()
    expect(() => bash.start({ command: 'true', cwd: '/', sandbox: { writable: ['relative/dir'], network: false } })).toThrow(expect.objectContaining({ code: 'INVALID_REQUEST', message: expect.stringContaining('absolute') }))
    expect(() => bash.start({ command: 'true', cwd: '/', sandbox: { writable: [], network: 'yes' } as never })).toThrow(expect.objectContaining({ code: 'INVALID_REQUEST', message: expect.stringContaining('sandbox.network') }))
    expect(() => bash.start({ command: 'true', cwd: '/', sandbox: null as never })).toThrow(expect.objectContaining({ code: 'INVALID_REQUEST' }))
    expect(() => bash.start({ command: 'true', cwd: '/', sandbox: { writable: [], readable: ['tmp'], network: false } })).toThrow(expect.objectContaining({ code: 'INVALID_REQUEST', message: expect.stringContaining('sandbox.readable') }))
  })
})
