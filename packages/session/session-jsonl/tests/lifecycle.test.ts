import { mkdir, readFile, rm, stat } from 'node:fs/promises'
import { homedir } from 'node:os'
import { join, resolve } from 'node:path'
import { Context, ValidationError } from 'cordis'
import { SessionStore } from '@dsh/session'
import SessionJsonl, { resolveSessionDir, SessionJsonlError } from '@dsh/session-jsonl'
import { describe, expect, it } from 'vitest'
import { appendTurn, captureWarnings, fileLines, startProcess, tempDir } from './harness.js'

describe('session-jsonl config and lifecycle', () => {
  it('a bad config fails at load with a message naming dir', async () => {
    const ctx = new Context()
    await ctx.plugin(SessionStore)
    const fiber = ctx.plugin(SessionJsonl, { dir: 5 } as never)
    const failure = await Promise.resolve(fiber).then(() => undefined, (error: unknown) => error)
    expect(failure).toBeInstanceOf(ValidationError)
    expect((failure as Error).message).toMatch(/dir/)
    expect(ctx.sessions.storageName).toBeUndefined()
  })

  it('dir defaults to ~/.dsh/sessions and expands ~', () => {
    expect(resolveSessionDir({})).toBe(join(homedir(), '.dsh', 'sessions'))
    expect(resolveSessionDir({ dir: '~/x/y' })).toBe(join(homedir(), 'x', 'y'))
    expect(resolveSessionDir({ dir: 'rel' })).toBe(resolve('rel'))
  })

  it('loading creates the directory and registers the storage', async () => {
    const dir = join(await tempDir(), 'nested', 'sessions')
    const { sessions } = await startProcess(dir)
    expect((await stat(dir)).isDirectory()).toBe(true)
    expect(sessions.storageName).toBe('jsonl')
  })

  it('an id that could leave the directory is refused', async () => {
    const dir = await tempDir()
    const { sessions, warnings } = await startProcess(dir)
    for (const id of ['../escape', 'a/b', '..', '.hidden', 'a\\b', '']) {
      expect(() => sessions.locate(id)).toThrow(SessionJsonlError)
      await expect(sessions.readStored(id)).rejects.toMatchObject({ code: 'INVALID_ID' })
    }
    const session = sessions.create({ id: '../escape' })
    session.append({ type: 'turn/start', turn: 1 })
    await expect(sessions.release(session)).rejects.toMatchObject({ code: 'INVALID_ID' })
    expect(warnings.join('\n')).toMatch(/session-jsonl: .*"\.\.\/escape" cannot be stored as a file/)
    await expect(stat(join(dir, '..', 'escape.jsonl'))).rejects.toMatchObject({ code: 'ENOENT' })
  })

  it('a write failure is logged and surfaced by released(), without crashing', async () => {
    const dir = await tempDir()
    const { sessions, warnings } = await startProcess(dir)
    await rm(dir, { recursive: true }) // the directory disappears under the running process
    const session = sessions.create()
    appendTurn(session, 1, 'lost')
    const failure = await sessions.release(session).catch((error: unknown) => error)
    expect(failure).toBeInstanceOf(SessionJsonlError)
    expect(failure).toMatchObject({ code: 'WRITE_FAILED' })
    expect((failure as Error).message).toContain(join(dir, `${session.id}.jsonl`))
    expect((failure as Error).message).toContain('events from seq 0 on are not saved')
    expect(warnings).toHaveLength(1)
    expect(warnings[0]).toContain('ENOENT')
  })

  it('a new session whose id already has a file does not append to it', async () => {
    const dir = await tempDir()
    const first = await startProcess(dir)
    const original = first.sessions.create({ id: 'fixed-id' })
    appendTurn(original, 1, 'one')
    await first.sessions.release(original)
    const before = await readFile(join(dir, 'fixed-id.jsonl'))

    const second = await startProcess(dir)
    const clash = second.sessions.create({ id: 'fixed-id' })
    appendTurn(clash, 1, 'other')
    await expect(second.sessions.release(clash)).rejects.toMatchObject({ code: 'FOREIGN_FILE' })
    expect((await readFile(join(dir, 'fixed-id.jsonl'))).equals(before)).toBe(true)
  })

  it('unloading the plugin flushes and closes every live session', async () => {
    const dir = await tempDir()
    const { sessions, fiber } = await startProcess(dir)
    const session = sessions.create()
    appendTurn(session, 1, 'flushed on unload')
    await fiber.dispose()
    const lines = (await fileLines(join(dir, `${session.id}.jsonl`))).filter(Boolean)
    expect(lines).toHaveLength(7)
    expect(sessions.storageName).toBeUndefined()
  })

  it('sessions already live when the plugin loads are persisted too, including their earlier events', async () => {
    const dir = await tempDir()
    const ctx = new Context()
    captureWarnings(ctx)
    await ctx.plugin(SessionStore)
    const early = ctx.sessions.create()
    appendTurn(early, 1, 'before the plugin')
    const fiber = await ctx.plugin(SessionJsonl, { dir })
    appendTurn(early, 2, 'after the plugin')
    await fiber.dispose()

    // reload the plugin on the same directory: only the new events are appended
    const again = await ctx.plugin(SessionJsonl, { dir })
    appendTurn(early, 3, 'after the reload')
    await ctx.sessions.release(early)
    await again.dispose()

    const { sessions } = await startProcess(dir)
    expect((await sessions.open(early.id)).events()).toEqual(early.events())
    const text = await readFile(join(dir, `${early.id}.jsonl`), 'utf8')
    expect(text.match(/"kind":"header"/g)).toHaveLength(1)
    expect(text.match(/"kind":"resume"/g)).toHaveLength(1)
  })

  it('a second storage plugin is refused at load', async () => {
    const dir = await tempDir()
    const { ctx } = await startProcess(dir)
    await mkdir(join(dir, 'b'))
    const failure = await Promise.resolve(ctx.plugin(SessionJsonl, { dir: join(dir, 'b') })).then(() => undefined, (error: unknown) => error)
    expect(failure).toMatchObject({ code: 'DUPLICATE_STORAGE' })
  })
})

describe('two session stores on one session', () => {
  it('the second store cannot resume a session the first is running, and the first keeps writing', async () => {
    const dir = await tempDir()
    const first = await startProcess(dir)
    const original = first.sessions.create()
    appendTurn(original, 1, 'one')
    await first.sessions.release(original)

    const a = await startProcess(dir)
    const b = await startProcess(dir)
    const inA = await a.sessions.open(original.id)
    const refused = await b.sessions.open(original.id).catch((error: unknown) => error)
    expect(refused).toBeInstanceOf(SessionJsonlError)
    expect(refused).toMatchObject({ code: 'IN_USE' })
    expect((refused as Error).message).toContain(`is in use by this process (pid ${process.pid}`)
    appendTurn(inA, 2, 'from a')
    await a.sessions.release(inA)

    // Released: now the other store may resume it, and sees everything the first wrote.
    const reread = await b.sessions.open(original.id)
    expect(reread.events()).toEqual(inA.events())
    await b.sessions.release(reread)
  })
})
