/**
 * The trace context as a lineage field: W3C `traceparent`/`tracestate` beside `dsh` in the
 * ACP `_meta` and A2A `metadata` envelopes, validated when read (a malformed one starts a
 * new trace and is never repeated in a warning), recorded in the session header, and asked
 * of the process's tracer only when one is installed.
 */
import { describe, expect, it } from 'vitest'
import { A2A_LINEAGE, ACP_LINEAGE, lineageHeader, readTraceContext, readTraceparent, setTraceContextSource, traceContextOf, traceEnvironment } from '../src/index.js'

const TRACEPARENT = '00-4bf92f3577b34da6a3ce929d0e0e4736-00f067aa0ba902b7-01'

function warnings() {
  const lines: string[] = []
  return { lines, warn: (format: string, ...args: unknown[]) => void lines.push(args.reduce<string>((text, arg) => text.replace('%s', String(arg)), format)) }
}

const parent = { id: 'parent-session' } as Parameters<typeof traceContextOf>[0]['parent']

describe('the trace context on the lineage wires', () => {
  it.each([ACP_LINEAGE, A2A_LINEAGE])('%#: travels as root keys of the envelope, beside dsh, and reads back', (wire) => {
    const envelope = wire.carry({ parentSession: 'p', delegationDepth: 1, provider: 'acp', trace: { traceparent: TRACEPARENT, tracestate: 'vendor=abc' } })
    expect(envelope).toEqual({ dsh: { parentSession: 'p', delegationDepth: 1, provider: 'acp' }, traceparent: TRACEPARENT, tracestate: 'vendor=abc' })
    const log = warnings()
    expect(wire.read(JSON.parse(JSON.stringify(envelope)), log).trace).toEqual({ traceparent: TRACEPARENT, tracestate: 'vendor=abc' })
    expect(log.lines).toEqual([])
  })

  it('a lineage without a trace context carries none, and an envelope without one reads none (a new trace starts)', () => {
    expect(ACP_LINEAGE.carry({ parentSession: 'p', delegationDepth: 1, provider: 'acp' })).toEqual({ dsh: { parentSession: 'p', delegationDepth: 1, provider: 'acp' } })
    const log = warnings()
    expect(ACP_LINEAGE.read({ dsh: { parentSession: 'p' } }, log)).toEqual({ parentSession: 'p' })
    expect(log.lines).toEqual([])
  })

  it.each([
    ['not hex', '00-4bf92f3577b34da6a3ce929d0e0e473Z-00f067aa0ba902b7-01'],
    ['an all-zero trace id', '00-00000000000000000000000000000000-00f067aa0ba902b7-01'],
    ['an all-zero span id', '00-4bf92f3577b34da6a3ce929d0e0e4736-0000000000000000-01'],
    ['the forbidden version ff', 'ff-4bf92f3577b34da6a3ce929d0e0e4736-00f067aa0ba902b7-01'],
    ['version 00 with extra fields', `${TRACEPARENT}-extra`],
    ['upper case', TRACEPARENT.toUpperCase()],
    ['terminal escapes', `\u001b[31m${TRACEPARENT}`],
    ['not a string', 42],
  ])('a traceparent with %s starts a new trace, with one warning that does not repeat it', (_, traceparent) => {
    const log = warnings()
    const lineage = ACP_LINEAGE.read({ dsh: { parentSession: 'p' }, traceparent }, log, 'session/new')
    expect(lineage).toEqual({ parentSession: 'p' })
    expect(log.lines).toEqual(['ignoring a malformed traceparent of session/new (a new trace starts)'])
    expect(readTraceparent(traceparent)).toBeUndefined()
  })

  it('a future version with more fields is accepted, as W3C asks', () => {
    expect(readTraceparent(`01-4bf92f3577b34da6a3ce929d0e0e4736-00f067aa0ba902b7-01-more`)).toBeDefined()
  })

  it('a malformed tracestate is dropped on its own: the trace goes on without it', () => {
    expect(readTraceContext({ traceparent: TRACEPARENT, tracestate: 'Not Valid=\u0000' })).toEqual({ traceparent: TRACEPARENT })
    expect(readTraceContext({ traceparent: TRACEPARENT, tracestate: 'a=1, b=2' })).toEqual({ traceparent: TRACEPARENT, tracestate: 'a=1,b=2' })
    expect(readTraceContext({ traceparent: TRACEPARENT, tracestate: 'x'.repeat(600) })).toEqual({ traceparent: TRACEPARENT })
  })

  it('the session header records it', () => {
    expect(lineageHeader({ parentSession: 'p', trace: { traceparent: TRACEPARENT } }).trace).toEqual({ traceparent: TRACEPARENT })
  })
})

describe('the trace context source', () => {
  it('is asked only while a tracer has installed it, and gives the delegating call its context and environment', () => {
    expect(traceContextOf({ parent, callId: 'call_1' })).toBeUndefined()
    expect(traceEnvironment({ parent, callId: 'call_1' })).toEqual({})
    const asked: unknown[] = []
    const remove = setTraceContextSource((parentSession, toolCallId) => {
      asked.push([parentSession, toolCallId])
      return { traceparent: TRACEPARENT, tracestate: 'k=v' }
    })
    try {
      expect(traceContextOf({ parent, callId: 'call_1' })).toEqual({ traceparent: TRACEPARENT, tracestate: 'k=v' })
      expect(traceEnvironment({ parent, callId: 'call_2' })).toEqual({ TRACEPARENT, TRACESTATE: 'k=v' })
      expect(asked).toEqual([['parent-session', 'call_1'], ['parent-session', 'call_2']])
    } finally {
      remove()
    }
    expect(traceContextOf({ parent, callId: 'call_1' })).toBeUndefined()
  })
})

describe('the trace context on the queue wire', () => {
  it('travels inside the job lineage (a wire only dsh speaks), and a malformed one is dropped with a warning naming the field alone', async () => {
    const { QUEUE_LINEAGE } = await import('../src/index.js')
    const encoded = QUEUE_LINEAGE.encode({ parentSession: 'p', delegationDepth: 1, provider: 'queue', toolCallId: 'call_1', trace: { traceparent: TRACEPARENT } })
    expect(encoded).toEqual({ parentSession: 'p', delegationDepth: 1, provider: 'queue', toolCallId: 'call_1', trace: { traceparent: TRACEPARENT } })
    const log = warnings()
    expect(QUEUE_LINEAGE.decode(JSON.parse(JSON.stringify(encoded)), log).trace).toEqual({ traceparent: TRACEPARENT })
    expect(QUEUE_LINEAGE.decode({ parentSession: 'p', trace: { traceparent: 'evil\u001b[0m' } }, log)).toEqual({ parentSession: 'p' })
    expect(log.lines).toEqual(['ignoring malformed job.data.lineage field(s) of the queue job: trace'])
  })
})
