/**
 * `dsh acp` driven with random, mutated and oversized frames. Whatever arrives, it
 * answers every request that carries an id, writes nothing but JSON-RPC frames to stdout,
 * and exits only when its input ends (then with status 0).
 */
import { realpathSync, writeFileSync } from 'node:fs'
import { join } from 'node:path'
import { afterEach, describe, expect, it } from 'vitest'
import fc from 'fast-check'
import { PROTOCOL_VERSION } from '@agentclientprotocol/sdk'
import { killTrustRunning } from './acp-trust-client.js'
import { serveRaw } from './acp-trust-wire.js'
import { tempDir } from './cli.js'

afterEach(killTrustRunning)

const MAX_FRAME_BYTES = 8192

/** One line the fuzzer sends, and the id it must get an answer for (if any). */
interface Line {
  bytes: Buffer
  answerId?: string | number
}

/** The id a conforming server must answer: a well-formed request's. */
function requestIdOf(bytes: Buffer): string | number | undefined {
  let value: unknown
  try {
    value = JSON.parse(bytes.toString('utf8'))
  } catch {
    return undefined
  }
  if (typeof value !== 'object' || value === null || Array.isArray(value)) return undefined
  const frame = value as Record<string, unknown>
  if (frame.jsonrpc !== '2.0' || typeof frame.method !== 'string' || 'result' in frame || 'error' in frame) return undefined
  return typeof frame.id === 'string' || typeof frame.id === 'number' ? frame.id : undefined
}

/** Frames a client might send, valid or nearly so; `id` is filled in per line. */
function requestArbitrary(cwd: string) {
  const sessionId = fc.constantFrom('known-session', 'nope', '')
  return fc.oneof(
    fc.constant({ method: 'initialize', params: { protocolVersion: PROTOCOL_VERSION, clientCapabilities: {} } }),
    fc.constant({ method: 'session/new', params: { cwd, mcpServers: [] } }),
    fc.record({ method: fc.constant('session/new'), params: fc.record({ cwd: fc.oneof(fc.string(), fc.constant('/definitely/not/here')), mcpServers: fc.constant([]), _meta: fc.jsonValue() }, { requiredKeys: ['cwd'] }) }),
    fc.record({ method: fc.constant('session/prompt'), params: fc.record({ sessionId, prompt: fc.array(fc.record({ type: fc.constantFrom('text', 'image', 'resource'), text: fc.string() }), { maxLength: 3 }) }) }),
    fc.record({ method: fc.constant('session/close'), params: fc.record({ sessionId }) }),
    fc.record({ method: fc.constantFrom('session/load', 'session/list', 'no/such/method', '_dsh/extension'), params: fc.jsonValue() }),
  )
}

function linesArbitrary(cwd: string): fc.Arbitrary<Line[]> {
  const line = fc.oneof(
    // A request (possibly with odd params), answered by id.
    { weight: 5, arbitrary: requestArbitrary(cwd).map((frame) => ({ kind: 'request' as const, frame })) },
    // A notification: never answered.
    { weight: 1, arbitrary: fc.record({ sessionId: fc.string() }).map((params) => ({ kind: 'notification' as const, frame: { method: 'session/cancel', params } })) },
    // A request whose text is then damaged.
    { weight: 3, arbitrary: fc.tuple(requestArbitrary(cwd), fc.array(fc.tuple(fc.nat(), fc.integer({ min: 0, max: 255 })), { minLength: 1, maxLength: 4 })).map(([frame, edits]) => ({ kind: 'mutated' as const, frame, edits })) },
    // Bytes that are not JSON at all (no newline inside).
    { weight: 1, arbitrary: fc.uint8Array({ maxLength: 200 }).map((raw) => ({ kind: 'garbage' as const, raw })) },
    // An oversized request, with its id up front, padded past the limit.
    { weight: 1, arbitrary: fc.integer({ min: MAX_FRAME_BYTES, max: 4 * MAX_FRAME_BYTES }).map((size) => ({ kind: 'oversized' as const, size })) },
  )
  return fc.array(line, { minLength: 5, maxLength: 40 }).map((specs) =>
    specs.map((spec, index): Line => {
      const id = 1000 + index
      switch (spec.kind) {
        case 'request': {
          const bytes = Buffer.from(JSON.stringify({ jsonrpc: '2.0', id, ...spec.frame }))
          return { bytes, answerId: requestIdOf(bytes) }
        }
        case 'notification':
          return { bytes: Buffer.from(JSON.stringify({ jsonrpc: '2.0', ...spec.frame })) }
        case 'mutated': {
          const bytes = Buffer.from(JSON.stringify({ jsonrpc: '2.0', id, ...spec.frame }))
          for (const [at, byte] of spec.edits) bytes[at % bytes.length] = byte === 0x0a ? 0x20 : byte
          const answerId = requestIdOf(bytes)
          // A mutation can turn the id into another line's: expect an answer only for the line's own id.
          return { bytes, answerId: answerId === id ? id : undefined }
        }
        case 'garbage':
          return { bytes: Buffer.from(spec.raw.map((byte) => (byte === 0x0a ? 0x20 : byte))) }
        case 'oversized': {
          const head = `{"jsonrpc":"2.0","id":${id},"method":"session/new","params":{"pad":"`
          return { bytes: Buffer.from(`${head}${'p'.repeat(spec.size)}"}}`), answerId: id }
        }
      }
    }),
  )
}

describe('dsh acp under fuzzed input', () => {
  it('answers every request with an id, writes only JSON-RPC frames to stdout, and exits only at the end of input', async () => {
    const dir = realpathSync(tempDir())
    const model = join(dir, 'model.yml')
    writeFileSync(model, '- reply: [{ text: "fuzzed" }]\n')
    await fc.assert(
      fc.asyncProperty(linesArbitrary(dir), async (lines) => {
        const served = serveRaw(['--model', `scripted:${model}`, '--session-dir', dir, '--max-frame-bytes', String(MAX_FRAME_BYTES), '--permission', 'reject'])
        let exitedEarly = false
        void served.exited.then(() => (exitedEarly = true))
        const answers = lines.flatMap((line) => (line.answerId === undefined ? [] : [served.response(line.answerId)]))
        for (const line of lines) await served.write(Buffer.concat([line.bytes, Buffer.from('\n')]))
        const replies = await Promise.all(answers)
        expect(replies.every((reply) => reply.jsonrpc === '2.0')).toBe(true)
        expect(exitedEarly).toBe(false)
        served.child.stdin!.end()
        expect(await served.exited).toEqual({ code: 0, signal: null })
        served.assertProtocolOnly()
        expect(served.stderr()).toContain('dsh acp: exiting: the client closed stdin')
      }),
      { numRuns: 6, seed: 20261130 },
    )
  }, 240_000)
})
