/**
 * What crosses the queue, in both directions: the job a parent enqueues, the progress a
 * worker reports on it and the result it returns. Each is versioned (`v`) and validated
 * on the side that receives it, since either end may be another version of dsh, another
 * program writing to the same queue, or a corrupted entry: a payload that is not ours is a
 * clear error on the side that reads it, never a crash.
 *
 * Nothing secret travels: the prompt, the lineage (parent session, depth, label, bound)
 * and the parent's name for the worker's diagnostics. The worker's model, its keys and its
 * tools are the worker's own configuration.
 */
import { isRecord, STOP_REASONS, type StopReason } from '@dsh/base'
import { QUEUE_LINEAGE, SubagentError, type ReceivedLineage, type SubagentProgress, type SubagentUsage } from '@dsh/subagent'

export const WIRE_VERSION = 1
/** Longest prompt a job may carry, in characters (a job is a Redis value every worker reads). */
export const MAX_PROMPT_CHARS = 1_000_000
/** Longest answer a worker may return, in characters. */
export const MAX_OUTPUT_CHARS = 4_000_000
/** The BullMQ job name of every delegation. */
export const JOB_NAME = 'delegation'

/** A delegation as a job's data. */
export interface JobPayload {
  v: typeof WIRE_VERSION
  prompt: string
  /** The lineage the worker records in the child's session header (`QUEUE_LINEAGE`). */
  lineage: Record<string, unknown>
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

/** A job's reported progress: the updates since the previous report. */
export interface JobProgress {
  v: typeof WIRE_VERSION
  updates: SubagentProgress[]
}

const KNOWN_STOP_REASONS: ReadonlySet<string> = new Set(STOP_REASONS)

export function jobPayload(prompt: string, lineage: ReceivedLineage): JobPayload {
  return { v: WIRE_VERSION, prompt, lineage: QUEUE_LINEAGE.encode(lineage) }
}

/** A job's data as a worker reads it; `INVALID_REQUEST` naming what is wrong. */
export function readJobPayload(data: unknown): JobPayload {
  if (!isRecord(data)) throw invalid('the job data is not an object')
  if (data.v !== WIRE_VERSION) throw invalid(`the job is of wire version ${JSON.stringify(data.v)}, this worker reads version ${WIRE_VERSION}; run the same dsh version on parents and workers`)
  if (typeof data.prompt !== 'string' || data.prompt.trim() === '') throw invalid('the job has no prompt text')
  if (data.prompt.length > MAX_PROMPT_CHARS) throw invalid(`the job's prompt has ${data.prompt.length} characters, more than a worker accepts (${MAX_PROMPT_CHARS})`)
  if (data.lineage !== undefined && !isRecord(data.lineage)) throw invalid('the job\'s lineage is not an object')
  return { v: WIRE_VERSION, prompt: data.prompt, lineage: (data.lineage as Record<string, unknown> | undefined) ?? {} }
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

/** The updates a progress report carries (the lifecycle's channel validates each one again). */
export function readJobProgress(value: unknown): SubagentProgress[] {
  if (!isRecord(value) || value.v !== WIRE_VERSION || !Array.isArray(value.updates)) return []
  return value.updates.slice(0, 100).filter(isRecord) as unknown as SubagentProgress[]
}

export function readUsage(value: unknown): SubagentUsage | undefined {
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
