/**
 * An OTLP/HTTP trace receiver on 127.0.0.1 (port from the OS), standing in for a
 * collector: it takes what the official OpenTelemetry exporter sends to `/v1/traces`
 * (OTLP/JSON) and keeps every span, decoded into plain objects tests can query. It can
 * also hang (accept requests and never answer), and `refusingEndpoint` names a port where
 * nothing listens, for the cases of a collector that is slow or gone.
 */
import { createServer as createNetServer, type AddressInfo } from 'node:net'
import { isRecord } from '@dsh/base'
import { startLoopbackServer, type LoopbackServer } from './loopback-server.js'

export interface ReceivedSpan {
  traceId: string
  spanId: string
  /** Absent on a trace's root span. */
  parentSpanId?: string
  name: string
  /** OTLP's enum: 1 internal, 2 server, 3 client, … */
  kind: number
  startMs: number
  endMs: number
  attributes: Record<string, unknown>
  events: { name: string; attributes: Record<string, unknown> }[]
  status: { code: number; message?: string }
  /** The resource's attributes (`service.name`, `process.pid`). */
  resource: Record<string, unknown>
}

export interface OtlpReceiver extends LoopbackServer {
  /** Every span received so far, in arrival order. */
  readonly spans: ReceivedSpan[]
  /** Export requests received (answered or, when hanging, held). */
  readonly requests: number
  /** Resolves once `predicate` holds for the spans received (checked on every arrival); rejects after `timeoutMs`. */
  waitFor(predicate: (spans: readonly ReceivedSpan[]) => boolean, timeoutMs?: number): Promise<ReceivedSpan[]>
}

export interface OtlpReceiverOptions {
  /** `hang`: take each request and never answer (a stuck collector). Default `accept`. */
  mode?: 'accept' | 'hang'
}

/** An OTLP `AnyValue` as a plain value. */
function valueOf(value: unknown): unknown {
  if (!isRecord(value)) return undefined
  if ('stringValue' in value) return value.stringValue
  if ('boolValue' in value) return value.boolValue
  if ('intValue' in value) return Number(value.intValue)
  if ('doubleValue' in value) return value.doubleValue
  if ('arrayValue' in value) return (isRecord(value.arrayValue) && Array.isArray(value.arrayValue.values) ? value.arrayValue.values : []).map(valueOf)
  if ('kvlistValue' in value) return attributesOf(isRecord(value.kvlistValue) ? value.kvlistValue.values : [])
  return undefined
}

function attributesOf(list: unknown): Record<string, unknown> {
  const out: Record<string, unknown> = {}
  if (Array.isArray(list)) for (const item of list) if (isRecord(item) && typeof item.key === 'string') out[item.key] = valueOf(item.value)
  return out
}

/** OTLP/JSON's nanosecond timestamps (strings or numbers) in milliseconds. */
const ms = (nanos: unknown): number => Number(BigInt(String(nanos ?? 0)) / 1_000_000n)

/** The spans of one OTLP/JSON `ExportTraceServiceRequest`. */
export function decodeOtlpJson(body: string): ReceivedSpan[] {
  const request = JSON.parse(body) as unknown
  const out: ReceivedSpan[] = []
  if (!isRecord(request) || !Array.isArray(request.resourceSpans)) throw new Error('not an OTLP/JSON trace export request (no resourceSpans)')
  for (const resourceSpans of request.resourceSpans) {
    if (!isRecord(resourceSpans)) continue
    const resource = attributesOf(isRecord(resourceSpans.resource) ? resourceSpans.resource.attributes : [])
    for (const scope of Array.isArray(resourceSpans.scopeSpans) ? resourceSpans.scopeSpans : []) {
      for (const span of isRecord(scope) && Array.isArray(scope.spans) ? scope.spans : []) {
        if (!isRecord(span)) continue
        const status = isRecord(span.status) ? span.status : {}
        out.push({
          traceId: String(span.traceId),
          spanId: String(span.spanId),
          ...(typeof span.parentSpanId === 'string' && span.parentSpanId !== '' && { parentSpanId: span.parentSpanId }),
          name: String(span.name),
          kind: Number(span.kind ?? 0),
          startMs: ms(span.startTimeUnixNano),
          endMs: ms(span.endTimeUnixNano),
          attributes: attributesOf(span.attributes),
          events: (Array.isArray(span.events) ? span.events : []).filter(isRecord).map((event) => ({ name: String(event.name), attributes: attributesOf(event.attributes) })),
          status: { code: Number(status.code ?? 0), ...(typeof status.message === 'string' && { message: status.message }) },
          resource,
        })
      }
    }
  }
  return out
}

export async function startOtlpReceiver(options: OtlpReceiverOptions = {}): Promise<OtlpReceiver> {
  const spans: ReceivedSpan[] = []
  let requests = 0
  const waiters = new Set<() => void>()
  const server = await startLoopbackServer(async (req, res, body, stop) => {
    if (req.method !== 'POST' || req.url !== '/v1/traces') {
      res.writeHead(404).end()
      return
    }
    requests++
    if (options.mode === 'hang') {
      // Held until the exporter gives up or the receiver closes.
      await new Promise<void>((resolve) => stop.addEventListener('abort', () => resolve(), { once: true }))
      res.destroy()
      return
    }
    if (!String(req.headers['content-type'] ?? '').startsWith('application/json')) {
      res.writeHead(415, { 'content-type': 'text/plain' }).end('this receiver takes OTLP/JSON')
      return
    }
    spans.push(...decodeOtlpJson(body))
    res.writeHead(200, { 'content-type': 'application/json' }).end('{}')
    for (const wake of waiters) wake()
  })
  return {
    ...server,
    spans,
    get requests() {
      return requests
    },
    waitFor(predicate, timeoutMs = 20_000) {
      return new Promise((resolve, reject) => {
        const check = () => {
          if (!predicate(spans)) return
          waiters.delete(check)
          clearTimeout(timer)
          resolve([...spans])
        }
        const timer = setTimeout(() => {
          waiters.delete(check)
          reject(new Error(`the OTLP receiver did not get the expected spans within ${timeoutMs} ms (it has ${spans.length}: ${[...new Set(spans.map((span) => span.name))].join(', ')})`))
        }, timeoutMs)
        waiters.add(check)
        check()
      })
    },
  }
}

/** `http://127.0.0.1:PORT` of a port the OS just gave out and nothing listens on: a collector that refuses connections. */
export async function refusingEndpoint(): Promise<string> {
  const server = createNetServer()
  await new Promise<void>((resolve) => server.listen(0, '127.0.0.1', resolve))
  const { port } = server.address() as AddressInfo
  await new Promise<void>((resolve) => server.close(() => resolve()))
  return `http://127.0.0.1:${port}`
}
