import { readFile, readdir, writeFile } from 'node:fs/promises'
import { join } from 'node:path'
import { describe, expect, it, vi } from 'vitest'
import { appendTurn, fileLines, startProcess, tempDir } from './harness.js'

describe('session-jsonl persistence', () => {
  it('a persisted session reloads identically in a new process', async () => {
    const dir = await tempDir()
    const first = await startProcess(dir)
    const session = first.sessions.create({ origin: 'cli', label: 'demo' })
    appendTurn(session, 1, 'hello')
    session.append({ type: 'turn/start', turn: 2 })
    session.append({ type: 'tool/call', call: { type: 'tool-call', id: 'c1', name: 'read', args: { path: 'a.txt' } } })
    session.append({ type: 'tool/result', result: { type: 'tool-result', callId: 'c1', name: 'read', content: [{ type: 'text', text: 'A' }], isError: false } })
    session.append({ type: 'turn/end', turn: 2, reason: 'error', error: 'boom' })
    await first.sessions.release(session)

    const second = await startProcess(dir)
    const reloaded = await second.sessions.open(session.id)
    expect(reloaded).not.toBe(session)
    expect(reloaded.header).toEqual(session.header)
    expect(reloaded.events()).toEqual(session.events())
    expect(second.warnings).toEqual([])
  })

  it('writes one header line, then one line per event in seq order', async () => {
    const dir = await tempDir()
    const { sessions } = await startProcess(dir)
    const session = sessions.create()
    appendTurn(session, 1, 'hi')
    await sessions.release(session)

    const lines = await fileLines(join(dir, `${session.id}.jsonl`))
    expect(lines.pop()).toBe('') // every line ends in \n
    expect(JSON.parse(lines[0])).toEqual({ kind: 'header', version: 1, header: session.header })
    expect(lines.slice(1).map((line) => JSON.parse(line))).toEqual(session.events())
  })

  it('live assistant chunks are not persisted', async () => {
    const dir = await tempDir()
    const first = await startProcess(dir)
    const session = first.sessions.create()
    session.append({ type: 'turn/start', turn: 1 })
    session.publish({ type: 'assistant/chunk', kind: 'text', text: 'partial' })
    session.publish({ type: 'assistant/chunk', kind: 'reasoning', text: 'thinking' })
    session.append({ type: 'assistant/message', message: { role: 'assistant', content: [{ type: 'text', text: 'partial' }] } })
    await first.sessions.release(session)

    const text = await readFile(join(dir, `${session.id}.jsonl`), 'utf8')
    expect(text).not.toContain('assistant/chunk')
    const second = await startProcess(dir)
    expect((await second.sessions.open(session.id)).events().map((event) => event.type)).toEqual(['turn/start', 'assistant/message'])
  })

  it('released() resolves only once the file holds every event', async () => {
    const dir = await tempDir()
    const { sessions } = await startProcess(dir)
    const session = sessions.create()
    for (let turn = 1; turn <= 50; turn++) appendTurn(session, turn, 'x'.repeat(2000))
    await sessions.release(session)

    const lines = await fileLines(join(dir, `${session.id}.jsonl`))
    expect(lines.length).toBe(1 + 300 + 1)
    expect(JSON.parse(lines[300]).seq).toBe(299)
  })

  it('a new session gets its header on disk right away, before any event', async () => {
    const dir = await tempDir()
    const { sessions } = await startProcess(dir)
    const session = sessions.create()
    await vi.waitFor(async () => expect((await readdir(dir)).filter((name) => name.endsWith('.jsonl'))).toEqual([`${session.id}.jsonl`]))
    await vi.waitFor(async () => expect(await fileLines(join(dir, `${session.id}.jsonl`))).toHaveLength(2))
    await sessions.release(session)
    expect(await readdir(dir)).toEqual([`${session.id}.jsonl`]) // the release gave the lock back
  })

  it('events appended in the same tick are written with a single write', async () => {
    const dir = await tempDir()
    const { sessions } = await startProcess(dir)
    const { open } = await import('node:fs/promises')
    const probe = await open(join(dir, 'probe'), 'w')
    const prototype = Object.getPrototypeOf(probe) as { write: (...args: unknown[]) => unknown }
    await probe.close()
    const write = vi.spyOn(prototype, 'write')
    try {
      const session = sessions.create()
      for (let turn = 1; turn <= 20; turn++) appendTurn(session, turn, 'same tick') // 120 events, header too
      await sessions.release(session)
      expect(write).toHaveBeenCalledTimes(1)
    } finally {
      write.mockRestore()
    }
  })

  it('a fan-out of sessions costs one write per file, not one per event', async () => {
    const dir = await tempDir()
    const { sessions } = await startProcess(dir)
    const { open } = await import('node:fs/promises')
    const probe = await open(join(dir, 'probe'), 'w')
    const prototype = Object.getPrototypeOf(probe) as { write: (...args: unknown[]) => unknown }
    await probe.close()
    const write = vi.spyOn(prototype, 'write')
    try {
      // Fifty children created and run in one tick, as a parent's fan-out does: each file
      // gets its header and six events in a single write.
      const children = Array.from({ length: 50 }, () => sessions.create({ origin: 'subagent' }))
      for (const child of children) appendTurn(child, 1, 'child done')
      await Promise.all(children.map((child) => sessions.release(child)))
      expect(write).toHaveBeenCalledTimes(50)
      for (const child of children) expect(await fileLines(join(dir, `${child.id}.jsonl`))).toHaveLength(1 + 6 + 1) // header, six events, the empty string after the last newline
    } finally {
      write.mockRestore()
    }
  })

  it('resume appends after the existing bytes, with no second header', async () => {
    const dir = await tempDir()
    const first = await startProcess(dir)
    const session = first.sessions.create()
    appendTurn(session, 1, 'one')
    await first.sessions.release(session)
    const file = join(dir, `${session.id}.jsonl`)
    const before = await readFile(file)

    const second = await startProcess(dir)
    const resumed = await second.sessions.open(session.id)
    appendTurn(resumed, 2, 'two')
    await second.sessions.release(resumed)

    const after = await readFile(file)
    expect(after.subarray(0, before.length).equals(before)).toBe(true)
    const added = after.subarray(before.length).toString('utf8').split('\n').filter(Boolean).map((line) => JSON.parse(line))
    expect(added[0]).toMatchObject({ kind: 'resume', seq: 6 })
    expect(added.slice(1).map((event) => event.seq)).toEqual([6, 7, 8, 9, 10, 11])
    expect(after.toString('utf8').match(/"kind":"header"/g)).toHaveLength(1)

    const third = await startProcess(dir)
    expect((await third.sessions.open(session.id)).events()).toEqual(resumed.events())
    expect(third.warnings).toEqual([])
  })

  it('resuming without appending leaves the file untouched', async () => {
    const dir = await tempDir()
    const first = await startProcess(dir)
    const session = first.sessions.create()
    appendTurn(session, 1, 'one')
    await first.sessions.release(session)
    const file = join(dir, `${session.id}.jsonl`)
    const before = await readFile(file)

    const second = await startProcess(dir)
    await second.sessions.release(await second.sessions.open(session.id))
    expect((await readFile(file)).equals(before)).toBe(true)
  })

  it('a forked session stores only its own events and reloads with its seed', async () => {
    const dir = await tempDir()
    const first = await startProcess(dir)
    const parent = first.sessions.create()
    appendTurn(parent, 1, 'parent one')
    appendTurn(parent, 2, 'parent two')
    const child = first.sessions.create({ parentSession: parent.id, delegationDepth: 1, seed: { session: parent, length: 6 } })
    appendTurn(child, 2, 'child two')
    appendTurn(parent, 3, 'parent three') // after the fork: not the child's
    await first.sessions.release(child)
    await first.sessions.release(parent)

    const childLines = (await fileLines(join(dir, `${child.id}.jsonl`))).filter(Boolean).map((line) => JSON.parse(line))
    expect(childLines[0].header).toMatchObject({ parentSession: parent.id, seedLength: 6 })
    expect(childLines.slice(1).map((event) => event.seq)).toEqual([6, 7, 8, 9, 10, 11])

    const second = await startProcess(dir)
    const reloaded = await second.sessions.open(child.id)
    expect(reloaded.seedLength).toBe(6)
    expect(reloaded.events()).toEqual(child.events())
    expect(reloaded.messages().toArray()).toEqual(child.messages().toArray())
  })

  it('list() returns the headers of the stored sessions', async () => {
    const dir = await tempDir()
    const first = await startProcess(dir)
    const a = first.sessions.create({ label: 'a' })
    const b = first.sessions.create({ label: 'b', origin: 'acp' })
    appendTurn(b, 1, 'b')
    await first.sessions.release(a)
    await first.sessions.release(b)
    await writeFile(join(dir, 'notes.txt'), 'not a session\n')

    const second = await startProcess(dir)
    const headers = await second.sessions.listStored()
    expect(headers.sort((x, y) => x.label!.localeCompare(y.label!))).toEqual([a.header, b.header])
    expect(second.warnings).toEqual([])
  })

  it('list() includes a session created in the same tick', async () => {
    const dir = await tempDir()
    const { sessions, warnings } = await startProcess(dir)
    const session = sessions.create()
    expect(await sessions.listStored()).toEqual([session.header])
    expect(warnings).toEqual([])
  })

  it('a fork created without naming its parent records the seed\'s session as parentSession and reopens', async () => {
    const dir = await tempDir()
    const first = await startProcess(dir)
    const parent = first.sessions.create()
    appendTurn(parent, 1, 'one')
    const child = first.sessions.create({ seed: { session: parent, length: 6 } })
    appendTurn(child, 1, 'two')
    await first.sessions.release(child)
    await first.sessions.release(parent)
    expect(child.header.parentSession).toBe(parent.id)
    expect(first.warnings).toEqual([])
    const second = await startProcess(dir)
    expect((await second.sessions.open(child.id)).events()).toEqual(child.events())
  })

  it('list() skips a file whose header cannot be read, with a warning', async () => {
    const dir = await tempDir()
    const first = await startProcess(dir)
    const good = first.sessions.create()
    await first.sessions.release(good)
    await writeFile(join(dir, 'broken.jsonl'), '{"kind":"hea')
    await writeFile(join(dir, 'other.jsonl'), JSON.stringify({ kind: 'header', version: 1, header: { id: 'someone-else', createdAt: 'x', cwd: '/' } }) + '\n')

    const second = await startProcess(dir)
    expect(await second.sessions.listStored()).toEqual([good.header])
    expect(second.warnings).toHaveLength(2)
    expect(second.warnings.join('\n')).toMatch(/broken\.jsonl.*left out of the session list.*not valid JSON/)
    expect(second.warnings.join('\n')).toMatch(/other\.jsonl.*does not match the file name/)
  })

  it('locate() names the file, and reading an unknown id gives undefined', async () => {
    const dir = await tempDir()
    const { sessions } = await startProcess(dir)
    expect(sessions.locate('abc')).toBe(join(dir, 'abc.jsonl'))
    expect(await sessions.readStored('abc')).toBeUndefined()
    await expect(sessions.open('abc')).rejects.toMatchObject({ code: 'NOT_FOUND' })
  })
})
