/**
 * Whether this process traces, decided from the standard OpenTelemetry variables alone, so
 * that with tracing off nothing of it is loaded: `@dsh/tracing` (and the OpenTelemetry
 * packages it brings) is composed only when an OTLP endpoint is named
 * (`OTEL_EXPORTER_OTLP_ENDPOINT`, `OTEL_EXPORTER_OTLP_TRACES_ENDPOINT`) or
 * `OTEL_TRACES_EXPORTER` asks for `otlp`, unless `OTEL_SDK_DISABLED=true` or
 * `OTEL_TRACES_EXPORTER=none`. A config entry naming `@dsh/tracing` turns it on as well.
 */
import type { PluginEntry } from './config-entries.js'

export function tracingWanted(env: NodeJS.ProcessEnv = process.env): boolean {
  if (env.OTEL_SDK_DISABLED?.trim().toLowerCase() === 'true') return false
  const exporters = (env.OTEL_TRACES_EXPORTER ?? '').split(',').map((name) => name.trim().toLowerCase())
  if (exporters.includes('none')) return false
  if (exporters.includes('otlp')) return true
  return Boolean(env.OTEL_EXPORTER_OTLP_ENDPOINT?.trim() || env.OTEL_EXPORTER_OTLP_TRACES_ENDPOINT?.trim())
}

/** The tracing entry when the environment asks for it (a user's entry with the same id configures it). */
export function tracingEntries(env: NodeJS.ProcessEnv = process.env): PluginEntry[] {
  return tracingWanted(env) ? [{ id: 'tracing', name: '@dsh/tracing', config: {} }] : []
}
