/**
 * What tracing runs with: the plugin's config over the standard `OTEL_*` environment
 * variables (a programmatic setting wins, as OpenTelemetry's own SDKs do it). A malformed
 * variable is one warning naming it, and its default is used: a typo in a telemetry
 * setting never stops a run. The value of `OTEL_EXPORTER_OTLP_HEADERS` is never repeated
 * (it usually holds the collector's key), nor an endpoint's user, password or query.
 */
import { printable } from '@dsh/base'

export interface TracingConfig {
  /** The collector's OTLP/HTTP base URL (`/v1/traces` is appended), as `OTEL_EXPORTER_OTLP_ENDPOINT`. */
  endpoint?: string
  /** Headers of every export request (a collector's key), as `OTEL_EXPORTER_OTLP_HEADERS`. */
  headers?: Record<string, string>
  /** `service.name` of the spans, as `OTEL_SERVICE_NAME`; default `dsh`. */
  serviceName?: string
  /** Record prompts, completions, tool arguments and results on the spans, as `OTEL_INSTRUMENTATION_GENAI_CAPTURE_MESSAGE_CONTENT`; default false. */
  captureContent?: boolean
  /** How long a flush (at exit, before `dsh run` returns) may wait for the collector; default 2000 ms. */
  flushTimeoutMs?: number
  /** As `OTEL_TRACES_SAMPLER`; default `parentbased_always_on`. */
  sampler?: string
  /** As `OTEL_TRACES_SAMPLER_ARG` (the ratio of `traceidratio` samplers). */
  samplerArg?: number
  /** Longest string attribute value (longer ones are cut), as `OTEL_ATTRIBUTE_VALUE_LENGTH_LIMIT`; default 4096. */
  attributeValueLengthLimit?: number
}

export type SamplerName = 'always_on' | 'always_off' | 'traceidratio' | 'parentbased_always_on' | 'parentbased_always_off' | 'parentbased_traceidratio'

const SAMPLERS: readonly SamplerName[] = ['always_on', 'always_off', 'traceidratio', 'parentbased_always_on', 'parentbased_always_off', 'parentbased_traceidratio']

export interface TracingSettings {
  /** Where spans are POSTed: `<endpoint>/v1/traces`. */
  url: string
  headers: Record<string, string>
  serviceName: string
  captureContent: boolean
  flushTimeoutMs: number
  sampler: SamplerName
  samplerRatio: number
  attributeValueLengthLimit: number
  /** Batching, as `OTEL_BSP_SCHEDULE_DELAY`, `OTEL_BSP_MAX_QUEUE_SIZE`, `OTEL_BSP_MAX_EXPORT_BATCH_SIZE`. */
  scheduledDelayMs: number
  maxQueueSize: number
  maxExportBatchSize: number
}

export const DEFAULT_ENDPOINT = 'http://localhost:4318'
export const DEFAULT_FLUSH_TIMEOUT_MS = 2000
export const DEFAULT_ATTRIBUTE_LENGTH = 4096

/** A setting's value as a warning may show it: printable, and short. */
function shown(value: string): string {
  const text = printable(value)
  return JSON.stringify(text.length > 80 ? `${text.slice(0, 80)}…` : text)
}

/**
 * A collector's URL as a message may show it: scheme, host and path, never a user, a
 * password or a query (where collectors' tokens go); text that is not a URL is not shown
 * at all, since it may be a credential pasted into the wrong variable.
 */
export function shownEndpoint(value: string): string {
  let url: URL
  try {
    url = new URL(value.trim())
  } catch {
    return 'a value that is not a URL (not repeated)'
  }
  const hidden = url.username !== '' || url.password !== '' || url.search !== '' || url.hash !== ''
  url.username = ''
  url.password = ''
  url.search = ''
  url.hash = ''
  const text = printable(url.href).slice(0, 200)
  return hidden ? `${text} (its credentials not shown)` : text
}

/** `text` (an exporter's error) with every credential `url` carries cut out, in case an error repeats its URL. */
export function withoutCredentials(text: string, url: string): string {
  let parsed: URL
  try {
    parsed = new URL(url)
  } catch {
    return text
  }
  const secrets = [parsed.username, parsed.password, decodeURIComponent(parsed.username), decodeURIComponent(parsed.password), parsed.search.slice(1), parsed.hash.slice(1)].filter((secret) => secret.length > 0)
  return secrets.sort((a, b) => b.length - a.length).reduce((cut, secret) => cut.split(secret).join('***'), text)
}

/** `<base>/v1/traces` for an OTLP/HTTP base URL, or `undefined` when it is not an http(s) URL. */
export function tracesUrl(base: string, signalSpecific = false): string | undefined {
  let url: URL
  try {
    url = new URL(base)
  } catch {
    return undefined
  }
  if (url.protocol !== 'http:' && url.protocol !== 'https:') return undefined
  if (signalSpecific) return url.href
  // Appended to the path, so a query (a collector's token) stays a query.
  url.pathname = `${url.pathname.replace(/\/+$/, '')}/v1/traces`
  return url.href
}

/** `key=value,key=value` (W3C baggage-like, values percent-decoded), or `undefined` when malformed. */
export function parseHeaders(text: string): Record<string, string> | undefined {
  const headers: Record<string, string> = {}
  for (const part of text.split(',')) {
    if (part.trim() === '') continue
    const at = part.indexOf('=')
    if (at <= 0) return undefined
    const key = part.slice(0, at).trim()
    let value: string
    try {
      value = decodeURIComponent(part.slice(at + 1).trim())
    } catch {
      return undefined
    }
    if (!/^[!#$%&'*+.^_`|~0-9A-Za-z-]+$/.test(key) || /[\r\n\0]/.test(value)) return undefined
    headers[key] = value
  }
  return headers
}

/**
 * The settings of this process's tracer. `warn` hears one line per malformed setting,
 * naming it; the default is used instead.
 */
export function tracingSettings(config: TracingConfig, env: NodeJS.ProcessEnv, warn: (line: string) => void): TracingSettings {
  const integer = (name: string, fallback: number, min: number): number => {
    const raw = env[name]
    if (raw === undefined || raw.trim() === '') return fallback
    const value = Number(raw)
    if (Number.isSafeInteger(value) && value >= min) return value
    warn(`${name} must be an integer of at least ${min}, not ${shown(raw)}; using ${fallback}`)
    return fallback
  }

  let url: string | undefined
  if (config.endpoint !== undefined) {
    url = tracesUrl(config.endpoint)
    if (url === undefined) warn(`config endpoint must be an http(s) URL, not ${shownEndpoint(config.endpoint)}; using ${DEFAULT_ENDPOINT}`)
  }
  if (url === undefined && config.endpoint === undefined) {
    for (const [name, specific] of [['OTEL_EXPORTER_OTLP_TRACES_ENDPOINT', true], ['OTEL_EXPORTER_OTLP_ENDPOINT', false]] as const) {
      const raw = env[name]
      if (raw === undefined || raw.trim() === '') continue
      url = tracesUrl(raw.trim(), specific)
      if (url !== undefined) break
      warn(`${name} must be an http(s) URL, not ${shownEndpoint(raw)}; ignoring it`)
    }
  }
  url ??= tracesUrl(DEFAULT_ENDPOINT)!

  for (const name of ['OTEL_EXPORTER_OTLP_TRACES_PROTOCOL', 'OTEL_EXPORTER_OTLP_PROTOCOL'] as const) {
    const raw = env[name]
    if (raw === undefined || raw === '' || raw === 'http/json') continue
    warn(`${name}: dsh exports OTLP over HTTP as JSON (http/json), not ${shown(raw)}; sending http/json`)
    break
  }

  let headers: Record<string, string> = {}
  for (const name of ['OTEL_EXPORTER_OTLP_HEADERS', 'OTEL_EXPORTER_OTLP_TRACES_HEADERS'] as const) {
    const raw = env[name]
    if (raw === undefined || raw.trim() === '') continue
    const parsed = parseHeaders(raw)
    // Never shown: the value is the collector's credential more often than not.
    if (parsed === undefined) warn(`${name} must be a list of key=value pairs separated by commas; ignoring it`)
    else headers = { ...headers, ...parsed }
  }
  if (config.headers) headers = { ...headers, ...config.headers }

  let sampler: SamplerName = 'parentbased_always_on'
  const wanted = config.sampler ?? env.OTEL_TRACES_SAMPLER
  if (wanted !== undefined && wanted.trim() !== '') {
    if ((SAMPLERS as readonly string[]).includes(wanted.trim())) sampler = wanted.trim() as SamplerName
    else warn(`${config.sampler !== undefined ? 'config sampler' : 'OTEL_TRACES_SAMPLER'} must be one of ${SAMPLERS.join(', ')}, not ${shown(wanted)}; using parentbased_always_on`)
  }
  let samplerRatio = 1
  if (config.samplerArg !== undefined) samplerRatio = config.samplerArg
  else if (env.OTEL_TRACES_SAMPLER_ARG !== undefined && env.OTEL_TRACES_SAMPLER_ARG.trim() !== '') {
    const value = Number(env.OTEL_TRACES_SAMPLER_ARG)
    if (Number.isFinite(value) && value >= 0 && value <= 1) samplerRatio = value
    else warn(`OTEL_TRACES_SAMPLER_ARG must be a number from 0 to 1, not ${shown(env.OTEL_TRACES_SAMPLER_ARG)}; using 1`)
  }

  let captureContent = config.captureContent
  if (captureContent === undefined) {
    const raw = env.OTEL_INSTRUMENTATION_GENAI_CAPTURE_MESSAGE_CONTENT
    if (raw !== undefined && raw.trim() !== '') {
      const value = raw.trim().toLowerCase()
      if (value === 'true') captureContent = true
      else if (value !== 'false') warn(`OTEL_INSTRUMENTATION_GENAI_CAPTURE_MESSAGE_CONTENT must be true or false, not ${shown(raw)}; not recording content`)
    }
  }

  return {
    url,
    headers,
    serviceName: config.serviceName ?? (env.OTEL_SERVICE_NAME?.trim() || 'dsh'),
    captureContent: captureContent === true,
    flushTimeoutMs: config.flushTimeoutMs ?? DEFAULT_FLUSH_TIMEOUT_MS,
    sampler,
    samplerRatio,
    attributeValueLengthLimit: config.attributeValueLengthLimit ?? integer('OTEL_ATTRIBUTE_VALUE_LENGTH_LIMIT', DEFAULT_ATTRIBUTE_LENGTH, 1),
    scheduledDelayMs: integer('OTEL_BSP_SCHEDULE_DELAY', 1000, 0),
    maxQueueSize: integer('OTEL_BSP_MAX_QUEUE_SIZE', 32768, 1),
    maxExportBatchSize: integer('OTEL_BSP_MAX_EXPORT_BATCH_SIZE', 2048, 1),
  }
}
