import { existsSync } from 'node:fs'
import { readFile, readdir, stat, unlink, writeFile } from 'node:fs/promises'
import { join } from 'node:path'
import { Context } from 'cordis'
import { SessionStore } from '@dsh/session'
import SessionJsonl, { SessionJsonlError } from '@dsh/session-jsonl'
import { describe, expect, it } from 'vitest'
import { appendTurn, startProcess, tempDir } from './harness.js'
import { startSessionProcess } from './session-process.js'

const modeOf = async (path: string) => (await stat(path)).mode & 0o777

describe('one writer per session, across processes', () => {
  it('a session a live process runs cannot be resumed by a second process: it is in use by pid N, and the first keeps writing', async () => {
    const dir = await tempDir()
    const first = startSessionProcess(dir, 'create')
    const id = (await first.line('live ')).slice('live '.length)
    await first.command('turn 1')
    const file = join(dir, `${id}.jsonl`)
    await expect.poll(async () => (await readFile(file, 'utf8')).split('\n').length).toBe(8) // header + 6 events + ''
    const before = await readFile(file)

    const second = startSessionProcess(dir, 'resume', id)
    const refused = await second.line('refused ')
    expect(await second.exited).toBe(3)
    expect(refused).toContain('refused IN_USE ')
    expect(refused).toContain(`in use by pid ${first.child.pid}`)
    expect((await readFile(file)).equals(before)).toBe(true)

    await first.command('turn 2')
    await first.command('release').catch(() => {}) // it exits without answering
    expect(await first.exited).toBe(0)
    const { sessions } = await startProcess(dir)
    const stored = await sessions.readStored(id)
    expect(stored!.events.map((event) => event.type)).toEqual([...Array(2)].flatMap(() => ['turn/start', 'user/message', 'step/start', 'assistant/message', 'step/end', 'turn/end']))
    expect(existsSync(join(dir, `${id}.lock`))).toBe(false)
  })

  it('a stale lock left by a process killed with SIGKILL is taken over by the next resume', async () => {
    const dir = await tempDir()
    const first = startSessionProcess(dir, 'create')
    const id = (await first.line('live ')).slice('live '.length)
    await first.command('turn 1')
    const lock = join(dir, `${id}.lock`)
    await expect.poll(async () => JSON.parse(await readFile(lock, 'utf8').catch(() => '{}')).pid).toBe(first.child.pid)
    first.child.kill('SIGKILL')
    expect(await first.exited).toBe('SIGKILL')
    expect(existsSync(lock)).toBe(true)

    const second = startSessionProcess(dir, 'resume', id)
    expect(await second.line('live ')).toBe(`live ${id}`)
    expect(JSON.parse(await readFile(lock, 'utf8'))).toMatchObject({ pid: second.child.pid })
    await second.command('turn 2')
    await second.command('release').catch(() => {})
    expect(await second.exited).toBe(0)
    expect(existsSync(lock)).toBe(false)
  })

  it('every lock of a store is one owner record linked under the lock name, removed with the last lock', async () => {
    const dir = await tempDir()
    const { sessions } = await startProcess(dir)
    const live = Array.from({ length: 5 }, () => sessions.create())
    for (const session of live) appendTurn(session, 1, 'hi')
    await expect.poll(async () => (await readdir(dir)).filter((name) => name.endsWith('.lock')).length).toBe(5)
    const owners = (await readdir(dir)).filter((name) => name.endsWith('.owner'))
    expect(owners).toHaveLength(1)
    const record = await stat(join(dir, owners[0]!))
    expect(record.mode & 0o777).toBe(0o600)
    for (const session of live) {
      const lock = join(dir, `${session.id}.lock`)
      expect((await stat(lock)).ino).toBe(record.ino)
      expect(JSON.parse(await readFile(lock, 'utf8'))).toMatchObject({ pid: process.pid })
    }
    await Promise.all(live.slice(1).map((session) => sessions.release(session)))
    expect((await readdir(dir)).filter((name) => !name.endsWith('.jsonl')).sort()).toEqual([`${live[0]!.id}.lock`, owners[0]].sort())
    await sessions.release(live[0]!)
    expect((await readdir(dir)).filter((name) => !name.endsWith('.jsonl'))).toEqual([])
  })

  it('an owner record removed while a session is live (a clean-up of dot-files) costs no later session its file', async () => {
    const dir = await tempDir()
    const { sessions } = await startProcess(dir)
    const live = sessions.create()
    appendTurn(live, 1, 'first')
    // Once the live session's lock exists, the storage has finished writing its owner record.
    await expect.poll(() => existsSync(join(dir, `${live.id}.lock`))).toBe(true)
    const [owner] = (await readdir(dir)).filter((name) => name.endsWith('.owner'))
    await unlink(join(dir, owner!))
    const later = sessions.create()
    appendTurn(later, 1, 'second')
    await sessions.release(later)
    const stored = await sessions.readStored(later.id)
    expect(stored!.events.map((event) => event.type)).toContain('turn/end')
    expect(existsSync(join(dir, `${later.id}.lock`))).toBe(false)
    await sessions.release(live)
    expect((await readdir(dir)).filter((name) => !name.endsWith('.jsonl'))).toEqual([])
  })

  it('a lock replaced by hand is left alone on release', async () => {
    const dir = await tempDir()
    const { sessions } = await startProcess(dir)
    const session = sessions.create()
    appendTurn(session, 1, 'hi')
    const lock = join(dir, `${session.id}.lock`)
    await expect.poll(() => existsSync(lock)).toBe(true)
    const replaced = '{"pid":1,"token":"someone else"}\n'
    await unlink(lock)
    await writeFile(lock, replaced)
    await sessions.release(session)
    expect(await readFile(lock, 'utf8')).toBe(replaced)
  })

  it('a lock file that is not a lock (garbage, cut short) is treated as stale', async () => {
    const dir = await tempDir()
    const { sessions } = await startProcess(dir)
    const session = sessions.create()
    appendTurn(session, 1, 'one')
    await sessions.release(session)
    await writeFile(join(dir, `${session.id}.lock`), '{"pid":')
    const other = await startProcess(dir)
    const resumed = await other.sessions.open(session.id)
    expect(resumed.length).toBe(6)
    await other.sessions.release(resumed)
  })
})

describe('sessions are private', () => {
  it('session files are created 0600, the directory and its missing parents 0700', async () => {
    const home = join(await tempDir(), 'dsh-home')
    const dir = join(home, 'sessions')
    const { sessions } = await startProcess(dir)
    const session = sessions.create()
    appendTurn(session, 1, 'private')
    await sessions.release(session)
    expect(await modeOf(home)).toBe(0o700)
    expect(await modeOf(dir)).toBe(0o700)
    expect(await modeOf(join(dir, `${session.id}.jsonl`))).toBe(0o600)
  })

  it('a session dir that is a file (or runs through one) fails at load with NOT_A_DIRECTORY, naming it', async () => {
    const file = join(await tempDir(), 'not-a-dir')
    await writeFile(file, 'x')
    for (const dir of [file, join(file, 'sessions')]) {
      const ctx = new Context()
      await ctx.plugin(SessionStore)
      const failure = await Promise.resolve(ctx.plugin(SessionJsonl, { dir })).then(() => undefined, (error: unknown) => error)
      expect(failure).toBeInstanceOf(SessionJsonlError)
      expect(failure).toMatchObject({ code: 'NOT_A_DIRECTORY' })
      expect((failure as Error).message).toContain(`the session directory ${dir} `)
      expect(ctx.sessions.storageName).toBeUndefined()
    }
  })
})

describe('stale-lock takeover races', () => {
  it('of many stores taking over one stale lock at once, exactly one holds it and the rest are refused IN_USE', async () => {
    const dir = await tempDir()
    const { sessions } = await startProcess(dir)
    const stores = await Promise.all(Array.from({ length: 24 }, () => startProcess(dir)))
    // The race is between two reads and a replace: several rounds make a lost race likely to show.
    for (let round = 0; round < 6; round++) {
      const session = sessions.create()
      appendTurn(session, 1, 'one')
      await sessions.release(session)
      // A lock of a process that is gone: pid 2^22 is above Linux's pid_max.
      await writeFile(join(dir, `${session.id}.lock`), JSON.stringify({ pid: 4_194_304, token: 'gone' }) + '\n')
      const outcomes = await Promise.allSettled(stores.map(({ sessions: store }) => store.open(session.id)))
      const won = outcomes.flatMap((outcome, index) => (outcome.status === 'fulfilled' ? [{ store: stores[index].sessions, session: outcome.value }] : []))
      const refused = outcomes.flatMap((outcome) => (outcome.status === 'rejected' ? [outcome.reason as unknown] : []))
      expect(won).toHaveLength(1)
      expect(refused).toHaveLength(stores.length - 1)
      for (const reason of refused) expect(reason).toMatchObject({ code: 'IN_USE' })
      await won[0].store.release(won[0].session)
      expect(existsSync(join(dir, `${session.id}.lock.takeover`))).toBe(false)
      expect(existsSync(join(dir, `${session.id}.lock`))).toBe(false)
    }
  })
})
