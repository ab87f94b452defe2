/**
 * The tracer of one dsh process: every session's spans (`spans.ts`), batched and exported
 * over OTLP/HTTP (JSON) with the official OpenTelemetry packages, and the trace context
 * handed to each delegation (`@dsh/subagent`'s `setTraceContextSource`), so a child in any
 * process continues the trace.
 *
 * A collector that refuses or hangs never holds a run: exports time out after the flush
 * timeout, the last flush (when this plugin is disposed: at exit, after Ctrl-C, before
 * `dsh run` returns) waits at most that long, and what did not reach the collector is
 * dropped with one line saying how many spans and why.
 */
import {
  AlwaysOffSampler,
  AlwaysOnSampler,
  BasicTracerProvider,
  BatchSpanProcessor,
  ExportResultCode,
  OTLPTraceExporter,
  ParentBasedSampler,
  resourceFromAttributes,
  ROOT_CONTEXT,
  trace,
  TraceIdRatioBasedSampler,
  TraceState,
  W3CTraceContextPropagator,
  type Context as OtelContext,
  type ExportResult,
  type ReadableSpan,
  type Sampler,
  type SdkSpan as Span,
  type Span as ApiSpan,
  type SpanExporter,
  type SpanProcessor,
} from './otel.js'
import type { Context } from 'cordis'
import Schema from 'schemastery'
import { errorMessage } from '@dsh/base'
import type { Session, SessionHeader, TraceContext } from '@dsh/session'
import { readTraceContext, setTraceContextSource } from '@dsh/subagent'
import { SessionSpans } from './spans.js'
import { shownEndpoint, tracingSettings, withoutCredentials, type SamplerName, type TracingConfig, type TracingSettings } from './settings.js'

export const name = 'tracing'
export const inject = ['sessions']

export const Config: Schema<TracingConfig> = Schema.object({
  endpoint: Schema.string().description('The collector\'s OTLP/HTTP base URL (/v1/traces is appended); default OTEL_EXPORTER_OTLP_ENDPOINT, else http://localhost:4318.'),
  headers: Schema.dict(Schema.string(), Schema.string()).description('Headers of every export request, over OTEL_EXPORTER_OTLP_HEADERS.'),
  serviceName: Schema.string().description('service.name of the spans; default OTEL_SERVICE_NAME, else dsh.'),
  captureContent: Schema.boolean().description('Record prompts, completions, tool arguments and results on the spans; default OTEL_INSTRUMENTATION_GENAI_CAPTURE_MESSAGE_CONTENT, else false.'),
  flushTimeoutMs: Schema.natural().description('Longest a flush waits for the collector (default 2000 ms); spans it could not send are dropped.'),
  sampler: Schema.string().description('As OTEL_TRACES_SAMPLER (default parentbased_always_on).'),
  samplerArg: Schema.number().min(0).max(1).description('As OTEL_TRACES_SAMPLER_ARG.'),
  attributeValueLengthLimit: Schema.natural().min(1).description('Longest string attribute value; longer ones are cut (default 4096).'),
})

const propagator = new W3CTraceContextPropagator()

/** The trace context of `span`, as it crosses a boundary. */
export function traceContextOfSpan(span: ApiSpan | undefined): TraceContext | undefined {
  if (span === undefined) return undefined
  const carrier: Record<string, string> = {}
  propagator.inject(trace.setSpan(ROOT_CONTEXT, span), carrier, { set: (target, key, value) => void (target[key] = value) })
  return carrier.traceparent === undefined ? undefined : carrier.tracestate ? { traceparent: carrier.traceparent, tracestate: carrier.tracestate } : { traceparent: carrier.traceparent }
}

/** Where a session's turns go: under the context its header carries (checked again: a file may be edited), else a new trace. */
export function parentContextOf(header: Readonly<SessionHeader>): OtelContext {
  const carried = readTraceContext(header.trace)
  if (carried === undefined) return ROOT_CONTEXT
  // Already validated (W3C level 1): the fields are where the format puts them, so no second parse.
  const { traceparent, tracestate } = carried
  return trace.setSpanContext(ROOT_CONTEXT, {
    traceId: traceparent.slice(3, 35),
    spanId: traceparent.slice(36, 52),
    traceFlags: Number.parseInt(traceparent.slice(53, 55), 16) & 0xff,
    isRemote: true,
    ...(tracestate !== undefined && { traceState: new TraceState(tracestate) }),
  })
}

/** The context `TRACEPARENT`/`TRACESTATE` name (a CI job, a script, an agent that runs dsh), if valid; a malformed one is one warning, never repeated. */
function environmentContext(env: NodeJS.ProcessEnv, warn: (line: string) => void): OtelContext | undefined {
  const traceparent = env.TRACEPARENT?.trim()
  if (!traceparent) return undefined
  const trace = readTraceContext({ traceparent, tracestate: env.TRACESTATE?.trim() })
  if (trace === undefined) {
    warn('TRACEPARENT is not a W3C traceparent; the run starts a new trace')
    return undefined
  }
  return parentContextOf({ trace } as SessionHeader)
}

function samplerOf(name: SamplerName, ratio: number): Sampler {
  switch (name) {
    case 'always_on':
      return new AlwaysOnSampler()
    case 'always_off':
      return new AlwaysOffSampler()
    case 'traceidratio':
      return new TraceIdRatioBasedSampler(ratio)
    case 'parentbased_always_on':
      return new ParentBasedSampler({ root: new AlwaysOnSampler() })
    case 'parentbased_always_off':
      return new ParentBasedSampler({ root: new AlwaysOffSampler() })
    case 'parentbased_traceidratio':
      return new ParentBasedSampler({ root: new TraceIdRatioBasedSampler(ratio) })
  }
}

/** Counts what the exporter delivered, and remembers why the last export failed. */
class CountingExporter implements SpanExporter {
  delivered = 0
  failed: string | undefined

  constructor(private readonly inner: SpanExporter) {}

  export(spans: ReadableSpan[], done: (result: ExportResult) => void): void {
    this.inner.export(spans, (result) => {
      if (result.code === ExportResultCode.SUCCESS) this.delivered += spans.length
      else this.failed = result.error ? errorMessage(result.error).split('\n')[0] : 'the export failed'
      done(result)
    })
  }

  shutdown(): Promise<void> {
    return this.inner.shutdown()
  }

  forceFlush(): Promise<void> {
    return this.inner.forceFlush?.() ?? Promise.resolve()
  }
}

/** Counts the spans that ended (so recorded ones that never reached the collector can be told). */
class CountingProcessor implements SpanProcessor {
  ended = 0

  constructor(private readonly inner: SpanProcessor) {}

  onStart(span: Span, context: OtelContext): void {
    this.inner.onStart(span, context)
  }

  onEnd(span: ReadableSpan): void {
    if (span.spanContext().traceFlags & 1) this.ended++
    this.inner.onEnd(span)
  }

  forceFlush(): Promise<void> {
    return this.inner.forceFlush()
  }

  shutdown(): Promise<void> {
    return this.inner.shutdown()
  }
}

export interface Tracing {
  readonly settings: TracingSettings
  /** Send what is batched; resolves within the flush timeout, whatever the collector does. */
  flush(): Promise<void>
}

/** Resolves with `true` when `promise` settled within `ms`, `false` when the time ran out first. */
function within(promise: Promise<unknown>, ms: number): Promise<boolean> {
  return new Promise((resolve) => {
    const timer = setTimeout(() => resolve(false), ms)
    timer.unref?.()
    promise.then(
      () => {
        clearTimeout(timer)
        resolve(true)
      },
      () => {
        clearTimeout(timer)
        resolve(true)
      },
    )
  })
}

export function apply(ctx: Context, config: TracingConfig): void {
  const logger = ctx.logger('tracing')
  const settings = tracingSettings(config ?? {}, process.env, (line) => logger.warn(line))
  const exporter = new CountingExporter(
    new OTLPTraceExporter({ url: settings.url, headers: settings.headers, timeoutMillis: settings.flushTimeoutMs, keepAlive: true }),
  )
  const batch = new BatchSpanProcessor(exporter, {
    scheduledDelayMillis: settings.scheduledDelayMs,
    maxQueueSize: settings.maxQueueSize,
    maxExportBatchSize: Math.min(settings.maxExportBatchSize, settings.maxQueueSize),
    exportTimeoutMillis: settings.flushTimeoutMs,
  })
  const processor = new CountingProcessor(batch)
  const provider = new BasicTracerProvider({
    resource: resourceFromAttributes({ 'service.name': settings.serviceName, 'process.pid': process.pid }),
    sampler: samplerOf(settings.sampler, settings.samplerRatio),
    spanLimits: { attributeValueLengthLimit: settings.attributeValueLengthLimit, attributeCountLimit: 128, eventCountLimit: 128 },
    spanProcessors: [processor],
  })
  const tracer = provider.getTracer('@dsh/tracing')
  const live = new Map<string, SessionSpans>()
  const fromEnvironment = environmentContext(process.env, (line) => logger.warn(line))

  const attach = (session: Session) => {
    if (live.has(session.id)) return
    // A `dsh run` started inside a trace (TRACEPARENT, OpenTelemetry's environment carrier) puts its root there.
    const { header } = session
    const parent = header.trace === undefined && fromEnvironment !== undefined && header.parentSession === undefined && header.origin === 'cli' ? fromEnvironment : parentContextOf(header)
    const spans = new SessionSpans(tracer, header, parent, { captureContent: settings.captureContent })
    live.set(session.id, spans)
    // Events only: a traced session is not `listened`, so nobody builds live chunks for the tracer.
    session.subscribe(
      (update) => {
        if (update.type !== 'assistant/chunk') spans.event(update)
      },
      { chunks: false },
    )
  }
  const removeObserver = ctx.sessions.addObserver({
    created: attach,
    released: (session) => {
      live.get(session.id)?.close(Date.now(), 'the session was released', true)
      live.delete(session.id)
    },
  })
  for (const session of ctx.sessions.list()) attach(session)
  const removeSource = setTraceContextSource((parentSession, toolCallId) => traceContextOfSpan(live.get(parentSession)?.spanOf(toolCallId)))

  // Registered as an effect: disposing the composition (at exit, after Ctrl-C, before `dsh run` returns) awaits the last flush.
  ctx.effect(() => async () => {
    removeSource()
    removeObserver()
    const now = Date.now()
    for (const spans of live.values()) spans.close(now, 'dsh stopped', true)
    live.clear()
    const flushed = await within(provider.forceFlush(), settings.flushTimeoutMs)
    // Shut down without waiting: an export still in flight is abandoned, never waited for.
    void provider.shutdown().catch(() => {})
    const dropped = processor.ended - exporter.delivered
    if (dropped > 0) {
      const why = !flushed ? `no answer within ${settings.flushTimeoutMs} ms` : withoutCredentials(exporter.failed ?? 'not sent', settings.url)
      // The URL may carry the collector's credential (a user, a password, a token in the query): never shown.
      process.stderr.write(`dsh: tracing: ${dropped} span${dropped === 1 ? '' : 's'} dropped: the collector at ${shownEndpoint(settings.url)} did not take them (${why})\n`)
    }
  }, 'tracing: flush')
}
