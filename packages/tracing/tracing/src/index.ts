export { apply, Config, inject, name, parentContextOf, traceContextOfSpan } from './plugin.js'
export { tracingSettings, parseHeaders, shownEndpoint, tracesUrl, withoutCredentials, DEFAULT_FLUSH_TIMEOUT_MS, type TracingConfig, type TracingSettings } from './settings.js'
export { SessionSpans, agentNameOf, GEN_AI, DSH, type SessionSpansOptions } from './spans.js'
export { storedTreeAsOtlp, type StoredTreeOptions } from './stored.js'
