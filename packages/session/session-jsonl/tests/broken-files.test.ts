import { mkdir, readFile, rm, writeFile } from 'node:fs/promises'
import { join } from 'node:path'
import { SessionError } from '@dsh/session'
import { CorruptSessionFileError, SessionJsonlError } from '@dsh/session-jsonl'
import { describe, expect, it } from 'vitest'
import { appendTurn, startProcess, tempDir } from './harness.js'

/** A stored session of one turn (6 events, file lines 2-7), released; its file's lines. */
async function storedSession() {
  const dir = await tempDir()
  const first = await startProcess(dir)
  const session = first.sessions.create()
  appendTurn(session, 1, 'one')
  await first.sessions.release(session)
  const file = join(dir, `${session.id}.jsonl`)
  const lines = (await readFile(file, 'utf8')).split('\n').slice(0, -1)
  return { dir, id: session.id, file, lines }
}

type Breakage = [name: string, (lines: string[]) => string, line: number | undefined, message: string]

const breakages: Breakage[] = [
  ['an empty file', () => '', 1, 'the file is empty'],
  ['a truncated header', (lines) => lines[0].slice(0, 30), 1, 'the header line is not valid JSON'],
  ['an unknown format version', (lines) => [lines[0].replace('"version":1', '"version":2'), ...lines.slice(1)].join('\n') + '\n', 1, 'format version 2 is not supported'],
  ['a garbage line in the middle', (lines) => [...lines.slice(0, 3), '\u0000garbage', ...lines.slice(3)].join('\n') + '\n', 4, 'not valid JSON'],
  ['a duplicated line', (lines) => [...lines.slice(0, 3), lines[2], ...lines.slice(3)].join('\n') + '\n', 4, 'the event has seq 1, expected 2'],
  ['reordered lines', (lines) => [lines[0], lines[2], lines[1], ...lines.slice(3)].join('\n') + '\n', 2, 'the event has seq 1, expected 0'],
  ['a seq too large for a number', (lines) => [lines[0], lines[1].replace('"seq":0', '"seq":1e999'), ...lines.slice(2)].join('\n') + '\n', 2, 'the event has no integer "seq"'],
  ['a message whose content holds null', (lines) => [lines[0], lines[1], lines[2].replace(/"content":\[.*\]\}/, '"content":[null]}'), ...lines.slice(3)].join('\n') + '\n', 3, 'user/message event: message.content[0] must be a block of type "text" or "tool-result"'],
  ['a line of terminal escape sequences', (lines) => [...lines.slice(0, 3), '\u001b]0;pwned\u0007\u001b[2J{"x":\r', ...lines.slice(3)].join('\n') + '\n', 4, 'not valid JSON'],
  ['a header with a "__proto__" key (fields that would skip the checks)', (lines) => [lines[0].replace('"header":{', '"header":{"__proto__":{"maxDepth":-3,"delegationDepth":"lots"},'), ...lines.slice(1)].join('\n') + '\n', 1, 'the header has a "__proto__" key'],
  ['a header naming another session', (lines) => [lines[0].replace(/"id":"[^"]*"/, '"id":"../../etc/passwd\\nx"'), ...lines.slice(1)].join('\n') + '\n', 1, 'header.id "../../etc/passwd\\nx" does not match the file name'],
]

describe('broken session files give one clear error and stay untouched', () => {
  it.each(breakages)('%s: resume and read fail naming file and line, and the file is unchanged', async (_name, breakIt, line, message) => {
    const { dir, id, file, lines } = await storedSession()
    await writeFile(file, breakIt(lines))
    const before = await readFile(file)
    const { sessions } = await startProcess(dir)
    for (const attempt of [() => sessions.open(id), () => sessions.readStored(id)]) {
      const failure = await attempt().catch((error: unknown) => error)
      expect(failure).toBeInstanceOf(CorruptSessionFileError)
      expect(failure).toBeInstanceOf(SessionError)
      expect(failure).toMatchObject({ code: 'CORRUPT', file, line })
      expect((failure as Error).message).toContain(`${file}:${line}: ${message}`)
      expect((failure as Error).message).not.toContain('\n')
      // Bytes quoted from the file never reach a terminal as control characters.
      expect((failure as Error).message).not.toMatch(/[\u0000-\u0008\u000b-\u001f\u007f]/)
    }
    expect((await readFile(file)).equals(before)).toBe(true)
    expect(sessions.get(id)).toBeUndefined()
  })

  it('a directory under a session\'s file name is UNREADABLE, naming it', async () => {
    const dir = await tempDir()
    await mkdir(join(dir, 'abc.jsonl'))
    const { sessions } = await startProcess(dir)
    const failure = await sessions.open('abc').catch((error: unknown) => error)
    expect(failure).toBeInstanceOf(SessionJsonlError)
    expect(failure).toMatchObject({ code: 'UNREADABLE' })
    expect((failure as Error).message).toBe(`cannot read session file ${join(dir, 'abc.jsonl')}: it is not a regular file`)
  })

  it('hostile ids are refused before any file is touched', async () => {
    const dir = await tempDir()
    const { sessions } = await startProcess(dir)
    for (const id of ['../../etc/passwd', 'a\nb', 'x'.repeat(129), '.lock', 'a/../b']) {
      await expect(sessions.open(id)).rejects.toMatchObject({ name: 'SessionJsonlError', code: 'INVALID_ID' })
    }
  })

  it('a fork whose parent\'s file is gone says exactly that', async () => {
    const dir = await tempDir()
    const first = await startProcess(dir)
    const parent = first.sessions.create()
    appendTurn(parent, 1, 'one')
    const fork = first.sessions.create({ seed: { session: parent, length: parent.length } })
    appendTurn(fork, 2, 'two')
    await first.sessions.release(fork)
    await first.sessions.release(parent)
    const parentFile = join(dir, `${parent.id}.jsonl`)
    await rm(parentFile)

    const { sessions } = await startProcess(dir)
    const failure = await sessions.open(fork.id).catch((error: unknown) => error)
    expect(failure).toBeInstanceOf(SessionError)
    expect((failure as Error).message).toBe(
      `session ${fork.id} is a fork of session ${parent.id}, whose stored file ${parentFile} is gone; the fork cannot be rebuilt without the first 6 events of its parent`,
    )
    // The fork's own file still reads (for `dsh sessions show`).
    expect((await sessions.readStored(fork.id))!.events).toHaveLength(6)
  })
})
