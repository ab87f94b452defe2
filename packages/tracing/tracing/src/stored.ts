/**
 * A stored tree as one trace, for `dsh sessions trace`: the sessions of a finished run
 * replayed through the same span builder as a live one (`spans.ts`), each event at its own
 * timestamp, each child under its parent's delegating call, serialised as an OTLP/JSON
 * export request (what a collector's `/v1/traces` takes). Ids are new: a run that was not
 * traced live had none.
 */
import { AlwaysOnSampler, BasicTracerProvider, InMemorySpanExporter, JsonTraceSerializer, resourceFromAttributes, ROOT_CONTEXT, SimpleSpanProcessor, trace } from './otel.js'
import type { StoredSession } from '@dsh/session'
import { SessionSpans } from './spans.js'
import { DEFAULT_ATTRIBUTE_LENGTH } from './settings.js'

export interface StoredTreeOptions {
  serviceName?: string
  captureContent?: boolean
}

/** The OTLP/JSON export request of `sessions` (a root and its descendants, any order). */
export async function storedTreeAsOtlp(sessions: readonly StoredSession[], options: StoredTreeOptions = {}): Promise<{ body: string; spans: number }> {
  const exporter = new InMemorySpanExporter()
  const provider = new BasicTracerProvider({
    resource: resourceFromAttributes({ 'service.name': options.serviceName ?? 'dsh' }),
    sampler: new AlwaysOnSampler(),
    spanLimits: { attributeValueLengthLimit: DEFAULT_ATTRIBUTE_LENGTH },
    spanProcessors: [new SimpleSpanProcessor(exporter)],
  })
  const tracer = provider.getTracer('@dsh/tracing')
  const byId = new Map(sessions.map((session) => [session.header.id, session]))
  const built = new Map<string, SessionSpans>()
  const build = (session: StoredSession, seen: Set<string>): SessionSpans => {
    const existing = built.get(session.header.id)
    if (existing) return existing
    seen.add(session.header.id)
    const parentId = session.header.parentSession
    const parent = parentId !== undefined && !seen.has(parentId) && byId.has(parentId) ? build(byId.get(parentId)!, seen) : undefined
    const parentSpan = parent?.spanOf(session.header.toolCallId)
    const spans = new SessionSpans(tracer, session.header, parentSpan ? trace.setSpan(ROOT_CONTEXT, parentSpan) : ROOT_CONTEXT, { captureContent: options.captureContent === true, keepEnded: true })
    for (const event of session.events) spans.event(event)
    const last = session.events.at(-1)?.ts ?? Date.parse(session.header.createdAt)
    spans.close(last, 'the stored session ends here', true)
    built.set(session.header.id, spans)
    return spans
  }
  for (const session of sessions) build(session, new Set())
  await provider.forceFlush()
  const finished = exporter.getFinishedSpans()
  const bytes = JsonTraceSerializer.serializeRequest(finished)
  await provider.shutdown()
  return { body: bytes === undefined ? '{"resourceSpans":[]}' : new TextDecoder().decode(bytes), spans: finished.length }
}
