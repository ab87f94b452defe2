import { appendFile, readFile, writeFile } from 'node:fs/promises'
import { join } from 'node:path'
import { SessionError } from '@dsh/session'
import { CorruptSessionFileError } from '@dsh/session-jsonl'
import { describe, expect, it } from 'vitest'
import { appendTurn, fileLines, startProcess, tempDir } from './harness.js'

/** A stored session of two turns (12 events, file lines 2-13), released. */
async function storedSession() {
  const dir = await tempDir()
  const first = await startProcess(dir)
  const session = first.sessions.create()
  appendTurn(session, 1, 'one')
  appendTurn(session, 2, 'two')
  await first.sessions.release(session)
  return { dir, session, file: join(dir, `${session.id}.jsonl`) }
}

describe('session-jsonl crash recovery', () => {
  it('a torn last line is dropped with a warning naming file and line; the rest is kept', async () => {
    const { dir, session, file } = await storedSession()
    await appendFile(file, '{"type":"turn/start","turn":3,"se') // a write cut short by a crash

    const stored = await (await startProcess(dir)).sessions.readStored(session.id)
    expect(stored!.events).toEqual(session.events())
    expect(stored!.warnings).toHaveLength(1)
    expect(stored!.warnings[0]).toContain(`${file}:14: dropped a torn line`)
    expect(stored!.warnings[0]).toContain('no trailing newline')
    expect(stored!.warnings[0]).toContain('kept the 12 events before it')
  })

  it('open() of a torn file resumes and logs the warning', async () => {
    const { dir, session, file } = await storedSession()
    await appendFile(file, '{"type":"tu')
    const second = await startProcess(dir)
    const resumed = await second.sessions.open(session.id)
    expect(resumed.events()).toEqual(session.events())
    expect(second.warnings.join('\n')).toMatch(/dropped a torn line/)
  })

  it('an unreadable last line with a newline is dropped too', async () => {
    const { dir, session, file } = await storedSession()
    await appendFile(file, '\u0000\u0000\u0000\n')
    const stored = await (await startProcess(dir)).sessions.readStored(session.id)
    expect(stored!.events).toEqual(session.events())
    expect(stored!.warnings[0]).toContain(`${file}:14: dropped a torn line`)
  })

  it('a complete last event missing only its newline is kept', async () => {
    const { dir, session, file } = await storedSession()
    const text = await readFile(file, 'utf8')
    await writeFile(file, text.slice(0, -1))
    const stored = await (await startProcess(dir)).sessions.readStored(session.id)
    expect(stored!.events).toEqual(session.events())
    expect(stored!.warnings).toEqual([])
  })

  it('resuming a torn file isolates the fragment behind a resume record, and it reloads cleanly', async () => {
    const { dir, session, file } = await storedSession()
    await appendFile(file, '{"type":"turn/start","tu')
    const tornBytes = await readFile(file)

    const second = await startProcess(dir)
    const resumed = await second.sessions.open(session.id)
    appendTurn(resumed, 3, 'three')
    await second.sessions.release(resumed)

    const after = await readFile(file)
    expect(after.subarray(0, tornBytes.length).equals(tornBytes)).toBe(true) // nothing rewritten
    const lines = await fileLines(file)
    expect(lines[13]).toBe('{"type":"turn/start","tu')
    expect(JSON.parse(lines[14])).toMatchObject({ kind: 'resume', seq: 12 })
    expect(JSON.parse(lines[15])).toMatchObject({ type: 'turn/start', turn: 3, seq: 12 })

    const third = await startProcess(dir)
    const stored = await third.sessions.readStored(session.id)
    expect(stored!.events).toEqual(resumed.events())
    expect(stored!.warnings).toHaveLength(1)
    expect(stored!.warnings[0]).toContain(`${file}:14: dropped a torn line`)
    expect(stored!.warnings[0]).toContain('a later writer resumed at line 15')
  })

  it('a crash during the first write after a resume is recovered on the next resume', async () => {
    const { dir, session, file } = await storedSession()
    // crash 1 tore an event; the resuming writer then crashed mid-way through its resume record
    await appendFile(file, '{"type":"turn/st' + '\n{"kind":"resu')

    const second = await startProcess(dir)
    const resumed = await second.sessions.open(session.id)
    expect(resumed.length).toBe(12)
    appendTurn(resumed, 3, 'three')
    await second.sessions.release(resumed)

    const stored = await (await startProcess(dir)).sessions.readStored(session.id)
    expect(stored!.events).toEqual(resumed.events())
    expect(stored!.warnings).toHaveLength(2)
  })

  it('a corrupt line in the middle fails, naming the file and line', async () => {
    const { dir, session, file } = await storedSession()
    const lines = await fileLines(file)
    lines[4] = lines[4].slice(0, 10) // line 5
    await writeFile(file, lines.join('\n'))

    const second = await startProcess(dir)
    const failure = await second.sessions.open(session.id).catch((error: unknown) => error)
    expect(failure).toBeInstanceOf(CorruptSessionFileError)
    expect(failure).toBeInstanceOf(SessionError)
    expect(failure).toMatchObject({ code: 'CORRUPT', file, line: 5 })
    expect((failure as Error).message).toContain(`${file}:5: not valid JSON`)
  })

  it('a gap in seq fails, naming the file and line', async () => {
    const { dir, session, file } = await storedSession()
    const lines = await fileLines(file)
    lines.splice(6, 1) // drop line 7 (seq 5)
    await writeFile(file, lines.join('\n'))
    await expect((await startProcess(dir)).sessions.readStored(session.id)).rejects.toThrow(`${file}:7: the event has seq 6, expected 5`)
  })

  it('an unknown event type, a second header, a malformed tool record or a wrong header id fail loudly', async () => {
    const { dir, session, file } = await storedSession()
    const original = await readFile(file, 'utf8')
    const { sessions } = await startProcess(dir)

    await writeFile(file, original + JSON.stringify({ type: 'mystery', seq: 12, ts: 1 }) + '\n')
    await expect(sessions.readStored(session.id)).rejects.toThrow(`${file}:14: unknown event type "mystery"`)

    await writeFile(file, original + original.split('\n')[0] + '\n')
    await expect(sessions.readStored(session.id)).rejects.toThrow(`${file}:14: a second header record`)

    await writeFile(file, original + JSON.stringify({ type: 'turn/end', turn: 3, reason: 'bored', seq: 12, ts: 1 }) + '\n')
    await expect(sessions.readStored(session.id)).rejects.toThrow(`${file}:14: turn/end event: unknown reason "bored"`)

    const result = { type: 'tool-result', callId: 'c1', name: 'subagent', content: [{ type: 'text', text: 'ok' }] }
    await writeFile(file, original + JSON.stringify({ type: 'tool/result', result, record: ['not', 'an', 'object'], seq: 12, ts: 1 }) + '\n')
    await expect(sessions.readStored(session.id)).rejects.toThrow(`${file}:14: tool/result event: "record" must be an object`)
    await writeFile(file, original + JSON.stringify({ type: 'tool/result', result, record: { delegation: { childId: 'a2a:t1', provider: 'a2a', local: false } }, seq: 12, ts: 1 }) + '\n')
    expect((await sessions.readStored(session.id))?.events.at(-1)).toMatchObject({ type: 'tool/result', record: { delegation: { childId: 'a2a:t1' } } })

    await writeFile(file, original.replace(`"id":"${session.id}"`, '"id":"other"'))
    await expect(sessions.readStored(session.id)).rejects.toThrow(`${file}:1: header.id "other" does not match the file name`)
  })

  it('a torn header (crash while creating) is an error, not an empty session', async () => {
    const dir = await tempDir()
    const file = join(dir, 'torn-1.jsonl')
    await writeFile(file, '{"kind":"header","vers')
    const { sessions } = await startProcess(dir)
    await expect(sessions.readStored('torn-1')).rejects.toThrow(`${file}:1: the header line is not valid JSON`)
    await writeFile(file, '')
    await expect(sessions.readStored('torn-1')).rejects.toThrow(`${file}:1: the file is empty`)
  })
})
