/**
 * Every OpenTelemetry name this package uses, from one module. The CLI's bundler builds
 * this module (and the OpenTelemetry packages behind it) into a file of its own beside the
 * bundle, `dsh-otel.cjs`, which is read only when tracing runs: with tracing off not one
 * byte of OpenTelemetry is read or compiled at start-up.
 */
export { ROOT_CONTEXT, SpanKind, SpanStatusCode, trace, type Attributes, type Context, type Span, type Tracer } from '@opentelemetry/api'
export { ExportResultCode, TraceState, W3CTraceContextPropagator, type ExportResult } from '@opentelemetry/core'
export { OTLPTraceExporter } from '@opentelemetry/exporter-trace-otlp-http'
export { JsonTraceSerializer } from '@opentelemetry/otlp-transformer'
export { resourceFromAttributes } from '@opentelemetry/resources'
export {
  AlwaysOffSampler,
  AlwaysOnSampler,
  BasicTracerProvider,
  BatchSpanProcessor,
  InMemorySpanExporter,
  ParentBasedSampler,
  SimpleSpanProcessor,
  TraceIdRatioBasedSampler,
  type ReadableSpan,
  type Sampler,
  type Span as SdkSpan,
  type SpanExporter,
  type SpanProcessor,
} from '@opentelemetry/sdk-trace-base'
