/**
 * `dsh sessions trace ID [--endpoint URL]`: a stored tree (the session and every
 * descendant stored beside it) as one OpenTelemetry trace, in the GenAI shape of a live
 * one (`@dsh/tracing`), so a run that was not traced live can still be looked at in a
 * tracing backend. Without `--endpoint` the OTLP/JSON export request goes to stdout
 * (`curl -H 'content-type: application/json' --data @- URL/v1/traces` takes it as it is);
 * with it, it is POSTed to the collector's `/v1/traces` (headers from
 * `OTEL_EXPORTER_OTLP_HEADERS`). Content is left out unless
 * `OTEL_INSTRUMENTATION_GENAI_CAPTURE_MESSAGE_CONTENT=true`.
 */
import { errorMessage } from '@dsh/base'
import type { SessionHeader, StoredSession } from '@dsh/session'
import type { Composition } from '../compose.js'
import { UsageError } from '../errors.js'
import { resolveSessionId } from '../session-ids.js'

/** How long a collector may take to answer the one export request. */
const SEND_TIMEOUT_MS = 10_000

export async function sessionsTrace(args: string[], runtime: Composition, options: { endpoint?: string }): Promise<number> {
  const wanted = args[0]
  if (!wanted) throw new UsageError('USAGE', 'dsh sessions trace: which session? (an id from `dsh sessions list`)')
  // Loaded only for this verb: OpenTelemetry's serialiser is no part of any other command.
  const { storedTreeAsOtlp, tracesUrl, parseHeaders, shownEndpoint, withoutCredentials } = await import('@dsh/tracing')
  const url = options.endpoint === undefined ? undefined : tracesUrl(options.endpoint)
  if (options.endpoint !== undefined && url === undefined) throw new UsageError('USAGE', 'dsh sessions trace: --endpoint must be an http(s) URL (the collector\'s OTLP/HTTP base, e.g. http://127.0.0.1:4318)')
  const { sessions } = runtime.ctx
  const headers = await sessions.listStored()
  const id = resolveSessionId(headers, wanted)
  const root = await sessions.readStored(id)
  if (!root) throw new UsageError('SESSION', `dsh sessions trace: no stored session ${wanted}`)
  const tree = [root, ...(await descendantsOf(root.header.id, headers, (child) => sessions.readStored(child)))]
  const capture = process.env.OTEL_INSTRUMENTATION_GENAI_CAPTURE_MESSAGE_CONTENT?.trim().toLowerCase() === 'true'
  const { body, spans } = await storedTreeAsOtlp(tree, { serviceName: process.env.OTEL_SERVICE_NAME?.trim() || 'dsh', captureContent: capture })
  if (url === undefined) {
    process.stdout.write(`${body}\n`)
    return 0
  }
  const extra = parseHeaders(process.env.OTEL_EXPORTER_OTLP_HEADERS ?? '') ?? {}
  try {
    const response = await fetch(url, { method: 'POST', headers: { ...extra, 'content-type': 'application/json' }, body, signal: AbortSignal.timeout(SEND_TIMEOUT_MS) })
    if (!response.ok) throw new Error(`HTTP ${response.status}`)
  } catch (error) {
    // The URL's user, password or query (a collector's token) are never shown, not even as a fetch error repeats them.
    process.stderr.write(`dsh sessions trace: the collector at ${shownEndpoint(url)} did not take the trace: ${withoutCredentials(errorMessage(error).split('\n')[0]!, url)}\n`)
    return 1
  }
  process.stderr.write(`dsh sessions trace: sent ${spans} span${spans === 1 ? '' : 's'} of ${tree.length} session${tree.length === 1 ? '' : 's'} to ${shownEndpoint(url)}\n`)
  return 0
}

/** Every stored descendant of `id`, parents before their children; one that cannot be read is left out. */
async function descendantsOf(id: string, headers: readonly SessionHeader[], read: (id: string) => Promise<StoredSession | undefined>): Promise<StoredSession[]> {
  const children = new Map<string, SessionHeader[]>()
  for (const header of headers) if (header.parentSession !== undefined) children.set(header.parentSession, [...(children.get(header.parentSession) ?? []), header])
  const out: StoredSession[] = []
  const seen = new Set([id])
  const queue = [id]
  while (queue.length > 0) {
    for (const child of children.get(queue.shift()!) ?? []) {
      if (seen.has(child.id)) continue
      seen.add(child.id)
      const stored = await read(child.id).catch(() => undefined)
      if (stored) out.push(stored)
      queue.push(child.id)
    }
  }
  return out
}
