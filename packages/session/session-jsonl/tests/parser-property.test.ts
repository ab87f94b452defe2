import { readFile, writeFile } from 'node:fs/promises'
import { join } from 'node:path'
import fc from 'fast-check'
import { SessionError } from '@dsh/session'
import { CorruptSessionFileError, SessionJsonlError } from '@dsh/session-jsonl'
import { describe, expect, it } from 'vitest'
import { appendTurn, startProcess, tempDir } from './harness.js'

/** How one file is damaged: positions are taken modulo the file's size or line count. */
const mutation = fc.oneof(
  fc.record({ kind: fc.constant('truncate' as const), at: fc.nat() }),
  fc.record({ kind: fc.constant('flip' as const), at: fc.nat(), byte: fc.integer({ min: 0, max: 255 }) }),
  fc.record({ kind: fc.constant('duplicate' as const), line: fc.nat() }),
  fc.record({ kind: fc.constant('swap' as const), a: fc.nat(), b: fc.nat() }),
  fc.record({ kind: fc.constant('drop' as const), line: fc.nat() }),
  fc.record({ kind: fc.constant('replace' as const), line: fc.nat(), value: fc.jsonValue({ maxDepth: 3 }) }),
  fc.record({ kind: fc.constant('garbage' as const), line: fc.nat(), text: fc.string({ maxLength: 40 }) }),
  fc.record({
    kind: fc.constant('number' as const),
    line: fc.nat(),
    key: fc.constantFrom('seq', 'turn', 'step', 'ts', 'version', 'seedLength', 'inputTokens'),
    value: fc.constantFrom('1e999', '-1', '1.5', '9007199254740993', '1e308', '"7"', 'null', '[]'),
  }),
  fc.record({ kind: fc.constant('id' as const), id: fc.oneof(fc.string({ maxLength: 20 }), fc.constantFrom('../x', '..', '/etc/passwd', 'a\u0000b', '__proto__')) }),
)
type Mutation = typeof mutation extends fc.Arbitrary<infer T> ? T : never

function mutate(original: Buffer, mutations: Mutation[]): Buffer {
  let bytes = Buffer.from(original)
  for (const change of mutations) {
    const lines = bytes.toString('utf8').split('\n')
    const pick = (n: number) => n % lines.length
    switch (change.kind) {
      case 'truncate':
        bytes = bytes.subarray(0, change.at % (bytes.length + 1))
        continue
      case 'flip':
        if (bytes.length > 0) bytes[change.at % bytes.length] = change.byte
        continue
      case 'duplicate':
        lines.splice(pick(change.line), 0, lines[pick(change.line)])
        break
      case 'swap': {
        const [a, b] = [pick(change.a), pick(change.b)]
        ;[lines[a], lines[b]] = [lines[b], lines[a]]
        break
      }
      case 'drop':
        lines.splice(pick(change.line), 1)
        break
      case 'replace':
        lines[pick(change.line)] = JSON.stringify(change.value) ?? ''
        break
      case 'garbage':
        lines[pick(change.line)] = change.text
        break
      case 'number':
        lines[pick(change.line)] = lines[pick(change.line)].replace(new RegExp(`"${change.key}":[^,}]*`), `"${change.key}":${change.value}`)
        break
      case 'id':
        lines[0] = lines[0].replace(/"id":"[^"]*"/, `"id":${JSON.stringify(change.id)}`)
        break
    }
    bytes = Buffer.from(lines.join('\n'), 'utf8')
  }
  return bytes
}

describe('the session file parser, fuzzed', () => {
  it('any mutated file resumes as a valid session or fails with one error naming file and line, and is never modified', async () => {
    const dir = await tempDir()
    const writer = await startProcess(dir)
    const base = writer.sessions.create()
    appendTurn(base, 1, 'one')
    const call = { type: 'tool-call' as const, id: 'c1', name: 'bash', args: { command: 'ls' } }
    base.append({ type: 'turn/start', turn: 2 })
    base.append({ type: 'assistant/message', message: { role: 'assistant', content: [{ type: 'reasoning', text: 'hm' }, call] }, finish: 'tool-calls' })
    base.append({ type: 'tool/call', call })
    base.append({ type: 'tool/result', result: { type: 'tool-result', callId: 'c1', name: 'bash', content: [{ type: 'text', text: 'a b' }] } })
    base.append({ type: 'turn/end', turn: 2, reason: 'blocked' as never })
    await writer.sessions.release(base)
    const file = join(dir, `${base.id}.jsonl`)
    const original = await readFile(file)
    const reader = await startProcess(dir)

    await fc.assert(
      fc.asyncProperty(fc.array(mutation, { minLength: 1, maxLength: 4 }), async (mutations) => {
        const damaged = mutate(original, mutations)
        await writeFile(file, damaged)
        const lineCount = damaged.toString('utf8').split('\n').length
        let session
        try {
          session = await reader.sessions.open(base.id)
        } catch (error) {
          // The one acceptable failure: a CORRUPT error naming this file and a line in it.
          expect(error).toBeInstanceOf(CorruptSessionFileError)
          expect(error).toBeInstanceOf(SessionError)
          const { file: named, line, message } = error as CorruptSessionFileError
          expect(named).toBe(file)
          expect(line).toBeGreaterThanOrEqual(1)
          expect(line).toBeLessThanOrEqual(lineCount)
          expect(message.startsWith(`${file}:${line}: `)).toBe(true)
          expect(message).not.toContain('\n')
          expect(message.length).toBeLessThan(file.length + 400)
        }
        if (session) {
          session.events().forEach((event, index) => expect(event.seq).toBe(index))
          await reader.sessions.release(session)
        }
        expect((await readFile(file)).equals(damaged)).toBe(true)
      }),
      { numRuns: 300, seed: 20261130, endOnFailure: true },
    )
  })

  it('any id either names a file inside the directory or is refused with INVALID_ID', async () => {
    const dir = await tempDir()
    const { sessions } = await startProcess(dir)
    await fc.assert(
      fc.asyncProperty(fc.string({ maxLength: 140, unit: 'binary' }), async (id) => {
        const failure = await sessions.open(id).then(() => undefined, (error: unknown) => error)
        expect(failure).toBeInstanceOf(Error)
        if (failure instanceof SessionJsonlError) expect(failure.code).toBe('INVALID_ID')
        else expect(failure).toMatchObject({ name: 'SessionError', code: 'NOT_FOUND' })
      }),
      { numRuns: 300, seed: 20261130 },
    )
  })
})
