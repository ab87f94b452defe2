/**
 * What crosses the queue, in both directions: the job a parent enqueues, the progress a
 * worker reports on it and the result it returns. Each is versioned (`v`) and validated
 * on the side that receives it, since either end may be another version of dsh, another
 * program writing to the same queue, or a corrupted entry: a payload that is not ours is a
 * clear error on the side that reads it, never a crash.
 *
 * Nothing secret travels: the prompt, the lineage (parent session, depth, label, bound,
 * rules, budget) and, for a child started from an agent definition, what the definition
 * says of it (its name, persona, tool lists and model spec, never a key). The worker's
 * keys and its tools themselves are the worker's own configuration.
 */
import { isRecord, printable, STOP_REASONS, TOOL_NAME_OR_PATTERN, type StopReason } from '@dsh/base'
import { QUEUE_LINEAGE, readReportedDescendant, SubagentError, type ReceivedLineage, type ReportedDescendant, type SubagentProgress, type SubagentRequest, type SubagentUsage } from '@dsh/subagent'

/** The version of progress reports, results, and of a job without a helper. */
export const WIRE_VERSION = 1
/**
 * The version of a job that carries a helper (`JobPayload.helper`). A job is written in
 * the lowest version that says all it holds, so a worker of the version before still
 * takes plain jobs, and refuses by its version check a job whose helper it would ignore.
 */
export const HELPER_JOB_VERSION = 2
/**
 * The version of a job whose helper names MCP servers (`JobHelper.mcpServers`): a worker
 * of version 2 would run the child without them, so it refuses the job by its version check.
 */
export const MCP_JOB_VERSION = 3
/** The job versions a worker reads. */
const JOB_VERSIONS: readonly number[] = [WIRE_VERSION, HELPER_JOB_VERSION, MCP_JOB_VERSION]
/** Longest prompt a job may carry, in characters (a job is a Redis value every worker reads). */
export const MAX_PROMPT_CHARS = 1_000_000
/** Longest answer a worker may return, in characters. */
const MAX_OUTPUT_CHARS = 4_000_000
/** The BullMQ job name of every delegation. */
export const JOB_NAME = 'delegation'

/** Longest persona a job may carry, in characters (an agent definition's file is at most 1 MiB). */
export const MAX_PERSONA_CHARS = 1_000_000
/** Most names one tool list of a job may hold. */
export const MAX_TOOL_NAMES = 256
/** Most MCP server names one job may hold. */
export const MAX_SERVER_NAMES = 64
/** An MCP server's name, as `@dsh/mcp` allows them (the middle of `mcp__<server>__<tool>`). */
const SERVER_NAME = /^(?=.{1,32}$)[A-Za-z0-9-]+(?:_[A-Za-z0-9-]+)*$/
/** A helper's name, as agent definitions allow them. */
const HELPER_NAME = /^[A-Za-z0-9][A-Za-z0-9_-]{0,63}$/
/** A definition's hash (16 hex digits today; any short token is accepted, it is descriptive). */
const HELPER_HASH = /^[A-Za-z0-9_-]{1,128}$/
/** A model spec, `adapter[:model]` (a script's path may follow the colon): an adapter name first, no control characters. */
const MODEL_SPEC = /^[A-Za-z0-9][A-Za-z0-9_.-]{0,63}(:[^\x00-\x1f\x7f]{1,1000})?$/
const HELPER_KEYS: ReadonlySet<string> = new Set(['name', 'hash', 'persona', 'tools', 'model', 'mcpServers'])
/** The fields of a job's data (`sig`: its signature, `signing.ts`). */
const JOB_KEYS: ReadonlySet<string> = new Set(['v', 'prompt', 'lineage', 'helper', 'sig'])

/**
 * How the worker makes the child, when the delegation says more than its prompt: the
 * agent definition it was started from (`name`, `hash`: recorded in the child's header),
 * the persona that replaces the worker's, the tool lists that filter the worker's tools,
 * the model spec the worker resolves. Each part is optional; a job without any has none.
 */
export interface JobHelper {
  name?: string
  hash?: string
  persona?: string
  /**
   * Tool names, or names ending in `*` (`mcp__github__*`), which the worker reads against
   * its own tools: the parent's tools are not the worker's.
   */
  tools?: { allow?: string[]; deny?: string[] }
  model?: string
  /**
   * The MCP servers the child gets, by name only: the worker runs each as its own config
   * says (a name it lacks fails the job), so a job never carries a command to run.
   */
  mcpServers?: string[]
}

/** A delegation as a job's data. */
export interface JobPayload {
  /** `WIRE_VERSION` without a helper, `HELPER_JOB_VERSION` with one, `MCP_JOB_VERSION` with one that names MCP servers. */
  v: typeof WIRE_VERSION | typeof HELPER_JOB_VERSION | typeof MCP_JOB_VERSION
  prompt: string
  /** The lineage the worker records in the child's session header (`QUEUE_LINEAGE`). */
  lineage: Record<string, unknown>
  helper?: JobHelper
  /** The job's signature, when the parent holds a queue key (`signing.ts`): over every other field, the queue and the job id. */
  sig?: string
}

/** What a worker returns for a job it ran (the job's return value). */
export interface JobResult {
  v: typeof WIRE_VERSION
  output: string
  stopReason: StopReason
  diagnostic?: string
  usage?: SubagentUsage
  /** The child's session id on the worker. */
  session: string
  /** Which worker ran it (`host:pid`). */
  worker: string
}

/**
 * A job's reported progress: the updates since the previous report, and each start and end
 * of an agent below the job's since then (`descendants`, `@dsh/subagent`'s
 * `ReportedDescendant`), so the parent's hooks fire `SubagentStart`/`SubagentStop` for them.
 */
export interface JobProgress {
  v: typeof WIRE_VERSION
  updates: SubagentProgress[]
  descendants?: ReportedDescendant[]
}

const KNOWN_STOP_REASONS: ReadonlySet<string> = new Set(STOP_REASONS)

export function jobPayload(prompt: string, lineage: ReceivedLineage, helper?: JobHelper): JobPayload {
  const payload: JobPayload = { v: WIRE_VERSION, prompt, lineage: QUEUE_LINEAGE.encode(lineage) }
  if (helper !== undefined) {
    payload.v = helper.mcpServers === undefined ? HELPER_JOB_VERSION : MCP_JOB_VERSION
    payload.helper = helper
  }
  return payload
}

/**
 * What of `request` a worker needs to make its child as the parent would have: its agent
 * definition's name, persona, tool filter and model; undefined when it sets none of them
 * (the common case, which then costs the job nothing).
 */
export function jobHelperOf(request: Pick<SubagentRequest, 'helper' | 'persona' | 'toolFilter' | 'agentOptions' | 'mcpServers'>): JobHelper | undefined {
  const { helper, persona, toolFilter } = request
  const model = request.agentOptions?.model
  const mcpServers = request.mcpServers !== undefined && request.mcpServers.length > 0 ? [...request.mcpServers] : undefined
  if (helper === undefined && persona === undefined && toolFilter === undefined && model === undefined && mcpServers === undefined) return undefined
  const job: JobHelper = {}
  if (helper !== undefined) {
    job.name = helper.name
    job.hash = helper.hash
  }
  if (persona !== undefined) job.persona = persona
  if (toolFilter !== undefined) {
    job.tools = {}
    if (toolFilter.allow !== undefined) job.tools.allow = [...toolFilter.allow]
    if (toolFilter.deny !== undefined) job.tools.deny = [...toolFilter.deny]
  }
  if (model !== undefined) job.model = model
  if (mcpServers !== undefined) job.mcpServers = mcpServers
  return job
}

/** A job's data as a worker reads it; `INVALID_REQUEST` naming what is wrong. */
export function readJobPayload(data: unknown): JobPayload {
  if (!isRecord(data)) throw invalid('the job data is not an object')
  const unknown = Object.keys(data).filter((key) => !JOB_KEYS.has(key))
  if (unknown.length > 0) throw invalid(`the job has field(s) this worker does not know (${unknown.slice(0, 5).map((key) => JSON.stringify(key.slice(0, 40))).join(', ')}); run the same dsh version on parents and workers`)
  if (!JOB_VERSIONS.includes(data.v as number)) throw invalid(`the job is of wire version ${JSON.stringify(data.v)}, this worker reads versions ${JOB_VERSIONS.slice(0, -1).join(', ')} and ${JOB_VERSIONS.at(-1)}; run the same dsh version on parents and workers`)
  if (typeof data.prompt !== 'string' || data.prompt.trim() === '') throw invalid('the job has no prompt text')
  if (data.prompt.length > MAX_PROMPT_CHARS) throw invalid(`the job's prompt has ${data.prompt.length} characters, more than a worker accepts (${MAX_PROMPT_CHARS})`)
  if (data.lineage !== undefined && !isRecord(data.lineage)) throw invalid('the job\'s lineage is not an object')
  const payload: JobPayload = { v: data.v as JobPayload['v'], prompt: data.prompt, lineage: (data.lineage as Record<string, unknown> | undefined) ?? {} }
  if (data.v === HELPER_JOB_VERSION || data.v === MCP_JOB_VERSION) {
    const helper = readJobHelper(data.helper)
    // The version says whether servers are named, so a worker that reads one never misreads the other.
    if ((helper.mcpServers !== undefined) !== (data.v === MCP_JOB_VERSION)) throw invalid(`a job whose helper names MCP servers is of wire version ${MCP_JOB_VERSION}, and only such a job is`)
    payload.helper = helper
  } else if (data.helper !== undefined) throw invalid(`a job of wire version ${WIRE_VERSION} carries no helper; one with a helper is version ${HELPER_JOB_VERSION}`)
  return payload
}

/**
 * A job's helper, checked as strictly as the rest: a field this worker does not know is
 * refused rather than ignored, since a child run without part of its definition (a tool
 * list, a persona) would do what its parent did not ask for.
 */
function readJobHelper(value: unknown): JobHelper {
  if (!isRecord(value)) throw invalid('the job\'s helper is not an object')
  const unknown = Object.keys(value).filter((key) => !HELPER_KEYS.has(key))
  if (unknown.length > 0) throw invalid(`the job's helper has field(s) this worker does not know (${unknown.slice(0, 5).map((key) => JSON.stringify(key.slice(0, 40))).join(', ')}); run the same dsh version on parents and workers`)
  const { name, hash, persona, tools, model, mcpServers } = value
  const helper: JobHelper = {}
  if (name !== undefined || hash !== undefined) {
    if (typeof name !== 'string' || !HELPER_NAME.test(name)) throw invalid('the job\'s helper.name is not a helper name (letters, digits, "-" and "_", at most 64)')
    if (typeof hash !== 'string' || !HELPER_HASH.test(hash)) throw invalid('the job\'s helper.hash is not a definition hash')
    helper.name = name
    helper.hash = hash
  }
  if (persona !== undefined) {
    if (typeof persona !== 'string' || persona.trim() === '') throw invalid('the job\'s helper.persona is not text')
    if (persona.length > MAX_PERSONA_CHARS) throw invalid(`the job's helper.persona has ${persona.length} characters, more than a worker accepts (${MAX_PERSONA_CHARS})`)
    helper.persona = persona
  }
  if (tools !== undefined) {
    if (!isRecord(tools) || (tools.allow === undefined && tools.deny === undefined) || Object.keys(tools).some((key) => key !== 'allow' && key !== 'deny')) {
      throw invalid('the job\'s helper.tools must be { allow?, deny? } with at least one of them')
    }
    helper.tools = {}
    if (tools.allow !== undefined) helper.tools.allow = readToolNames(tools.allow, 'allow')
    if (tools.deny !== undefined) helper.tools.deny = readToolNames(tools.deny, 'deny')
  }
  if (model !== undefined) {
    if (typeof model !== 'string' || !MODEL_SPEC.test(model)) throw invalid('the job\'s helper.model is not a model spec (adapter:model)')
    helper.model = model
  }
  if (mcpServers !== undefined) {
    if (!Array.isArray(mcpServers) || mcpServers.length === 0 || mcpServers.length > MAX_SERVER_NAMES || !mcpServers.every((server) => typeof server === 'string' && SERVER_NAME.test(server))) {
      throw invalid(`the job's helper.mcpServers is not a list of 1 to ${MAX_SERVER_NAMES} MCP server names (never a server's command: only names travel)`)
    }
    helper.mcpServers = [...(mcpServers as string[])]
  }
  return helper
}

function readToolNames(value: unknown, list: 'allow' | 'deny'): string[] {
  if (!Array.isArray(value) || value.length > MAX_TOOL_NAMES || !value.every((name) => typeof name === 'string' && TOOL_NAME_OR_PATTERN.test(name))) {
    throw invalid(`the job's helper.tools.${list} is not a list of at most ${MAX_TOOL_NAMES} tool names (or names ending in *)`)
  }
  return [...(value as string[])]
}

/** A job's return value as the parent reads it (BullMQ hands it over parsed, or as the JSON text it stored). */
export function readJobResult(value: unknown): JobResult {
  let data = value
  if (typeof data === 'string') {
    try {
      data = JSON.parse(data)
    } catch {
      throw invalid('the worker returned text that is not JSON')
    }
  }
  if (!isRecord(data)) throw invalid('the worker returned something that is not an object')
  if (data.v !== WIRE_VERSION) throw invalid(`the worker answered in wire version ${JSON.stringify(data.v)}, this parent reads version ${WIRE_VERSION}`)
  const { output, stopReason, diagnostic, usage, session, worker } = data
  if (typeof output !== 'string' || output.length > MAX_OUTPUT_CHARS) throw invalid('the worker\'s output is not text of a sane size')
  if (typeof stopReason !== 'string' || !KNOWN_STOP_REASONS.has(stopReason)) throw invalid(`the worker returned an unknown stop reason ${JSON.stringify(stopReason)?.slice(0, 40)}`)
  if (diagnostic !== undefined && typeof diagnostic !== 'string') throw invalid('the worker\'s diagnostic is not text')
  if (typeof session !== 'string' || typeof worker !== 'string') throw invalid('the worker did not say which session and worker ran the job')
  const result: JobResult = { v: WIRE_VERSION, output, stopReason: stopReason as StopReason, session: session.slice(0, 200), worker: worker.slice(0, 200) }
  if (diagnostic !== undefined) result.diagnostic = diagnostic.slice(0, 4_000)
  const read = readUsage(usage)
  if (read) result.usage = read
  return result
}

/**
 * The line a worker writes on a job's log as it takes the job (`Job.log`), before it runs
 * anything: which worker holds which try. A worker that dies says nothing more, so when
 * the job stalls out (BullMQ fails it with a reason of its own), these lines are what
 * names the workers that held it.
 */
export function takenLogLine(worker: string, attempt: number): string {
  return `taken by ${worker} (try ${attempt})`
}

const TAKEN_LINE = /^taken by (\S{1,200}) \(try (\d{1,6})\)$/

/** Who held a job, from its log, in the order they took it (lines that are not `takenLogLine`'s are skipped). */
export function holdersOf(logs: readonly unknown[]): Array<{ worker: string; attempt: number }> {
  const holders: Array<{ worker: string; attempt: number }> = []
  for (const line of logs) {
    const match = typeof line === 'string' ? TAKEN_LINE.exec(line) : null
    if (match) holders.push({ worker: printable(match[1]!), attempt: Number(match[2]) })
  }
  return holders
}

/** The updates a progress report carries (the lifecycle's channel validates each one again). */
export function readJobProgress(value: unknown): SubagentProgress[] {
  if (!isRecord(value) || value.v !== WIRE_VERSION || !Array.isArray(value.updates)) return []
  return value.updates.slice(0, 100).filter(isRecord) as unknown as SubagentProgress[]
}

/** The well-formed descendants a progress report names, in order (one of the wrong shape is dropped, said to `dropped`). */
export function readJobDescendants(value: unknown, dropped: (reason: string) => void): ReportedDescendant[] {
  if (!isRecord(value) || value.v !== WIRE_VERSION || value.descendants === undefined) return []
  if (!Array.isArray(value.descendants)) {
    dropped('a progress report whose descendants is not a list')
    return []
  }
  return value.descendants.slice(0, 100).flatMap((entry) => readReportedDescendant(entry, 'progress report descendants entry', dropped) ?? [])
}

function readUsage(value: unknown): SubagentUsage | undefined {
  if (!isRecord(value)) return undefined
  const count = (n: unknown) => (Number.isSafeInteger(n) && (n as number) >= 0 ? (n as number) : undefined)
  const inputTokens = count(value.inputTokens)
  const outputTokens = count(value.outputTokens)
  const cachedInputTokens = count(value.cachedInputTokens) ?? 0
  return inputTokens === undefined || outputTokens === undefined ? undefined : { inputTokens, outputTokens, cachedInputTokens }
}

function invalid(message: string): SubagentError {
  return new SubagentError('INVALID_REQUEST', message)
}
