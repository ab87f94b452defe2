/**
 * The environment of a child program, by allow-list: a minimal base that any program
 * needs to run as the user expects (where programs are, whose home, which language and
 * terminal, where temporary files go), plus the parent variables the config names
 * (`passEnv`), plus the variables the config sets (`env`). Everything else the parent
 * holds (database URLs, webhooks, tokens whatever their names) stays with the parent: a
 * model-run command or a delegated agent is another program with its own trust boundary.
 */

/** Variables every child inherits, when the parent has them. */
export const BASE_ENVIRONMENT: readonly string[] = [
  // where programs and the user's files are, and who the user is
  'PATH', 'HOME', 'USER', 'LOGNAME', 'SHELL',
  // language, character set and time zone (`LC_*` too, see below)
  'LANG', 'LANGUAGE', 'TZ',
  // the terminal and its colours
  'TERM', 'COLORTERM', 'NO_COLOR', 'FORCE_COLOR',
  // temporary files
  'TMPDIR', 'TMP', 'TEMP',
  // per-user directories of the XDG base directory convention
  'XDG_CONFIG_HOME', 'XDG_CACHE_HOME', 'XDG_DATA_HOME', 'XDG_STATE_HOME', 'XDG_RUNTIME_DIR',
  // a dsh started by the child (`dsh acp` as a provider, `dsh run` in a command) keeps the
  // same home and stores its sessions beside its parent's
  'DSH_HOME', 'DSH_SESSION_DIR',
]

/** Locale categories: `LC_ALL`, `LC_CTYPE`, `LC_MESSAGES`, … */
const LOCALE_CATEGORY = /^LC_[A-Z_]+$/

/**
 * OpenTelemetry's standard configuration (`OTEL_EXPORTER_OTLP_ENDPOINT`,
 * `OTEL_SERVICE_NAME`, …): a traced dsh's children (a `dsh acp` agent, Codex, Claude Code)
 * export to the same collector, so the tree is one trace.
 */
const OPENTELEMETRY = /^OTEL_[A-Z0-9_]+$/
/**
 * OpenTelemetry settings that hold the collector's credential (the exporter's headers, a
 * password, token or key): they go to agent children, which send spans where the parent's
 * go (`agentChild`), never to a command a model asked for.
 */
const OPENTELEMETRY_SECRET = /^OTEL_[A-Z0-9_]*(HEADERS|PASSWORD|SECRET|TOKEN|_KEY)(_[A-Z0-9_]*)?$/
/** An exporter's endpoint, which may carry a credential in its URL (`https://user:token@…`, `?api_key=…`). */
const OPENTELEMETRY_ENDPOINT = /^OTEL_EXPORTER_[A-Z0-9_]*ENDPOINT$/

const BASE_NAMES = new Set(BASE_ENVIRONMENT)

/**
 * Whether the OpenTelemetry variable `name` holds a credential: a secret by its name, or an
 * endpoint whose URL has a user, a password or a query (or cannot be read, so might).
 */
function isOpenTelemetrySecret(name: string, value: string | undefined): boolean {
  if (OPENTELEMETRY_SECRET.test(name)) return true
  if (!OPENTELEMETRY_ENDPOINT.test(name) || value === undefined) return false
  try {
    const url = new URL(value.trim())
    return url.username !== '' || url.password !== '' || url.search !== ''
  } catch {
    return value.trim() !== ''
  }
}

/**
 * Whether every child inherits `name` (when the parent has it, with `value`; an
 * OpenTelemetry endpoint is inherited only when its URL carries no credential).
 */
export function isBaseEnvironmentName(name: string, value?: string): boolean {
  return BASE_NAMES.has(name) || LOCALE_CATEGORY.test(name) || (OPENTELEMETRY.test(name) && !isOpenTelemetrySecret(name, value))
}

export interface ChildEnvironmentOptions {
  /** Variables applied last: they win over everything inherited, whatever their names. */
  env?: Readonly<Record<string, string>>
  /** Parent variables to inherit besides the base, by exact name (an API key the child needs, `NODE_OPTIONS`, …). */
  passEnv?: readonly string[]
  /** The child is an agent that exports its own spans (a `dsh acp` agent, Codex, Claude Code): it also gets the exporter's headers. */
  agentChild?: boolean
}

/**
 * The base variables of `parent` and those `passEnv` names (unset ones left out), then
 * `env` on top. Nothing else of `parent` reaches the child.
 */
export function childEnvironment(parent: NodeJS.ProcessEnv, options: ChildEnvironmentOptions = {}): Record<string, string> {
  const passed = new Set(options.passEnv)
  const env: Record<string, string> = {}
  for (const [name, value] of Object.entries(parent)) {
    if (value !== undefined && (passed.has(name) || isBaseEnvironmentName(name, value) || (options.agentChild === true && OPENTELEMETRY.test(name)))) env[name] = value
  }
  return { ...env, ...options.env }
}
