/**
 * `bestOf`: the same task tried several ways (helpers, providers, models), each attempt in
 * a workspace of its own, then judged: by a check command run in each workspace, by a
 * judge helper given the attempts' diffs, or both. The winner is merged (or left for
 * `dsh workspaces merge`), the others are discarded, and the result says why the winner won.
 */
import { readFile } from 'node:fs/promises'
import { join } from 'node:path'
import { errorMessage } from '@dsh/base'
import { childEnvironment, ProcessTree, TailBuffer } from '@dsh/process'
import { checkOf, runCheck, type CheckOption, type CheckOutcome, type CheckSpec } from './check.js'
import { WorkflowError } from './errors.js'
import { callKey } from './keys.js'
import type { AgentAnswer, WorkflowRunner } from './runner.js'

export interface BestOfAttempt {
  /** A helper or provider (default: the options' `helper`, else `spawn`). */
  helper?: string
  /** The task (default: the options' `prompt`). */
  prompt?: string
  model?: string
  label?: string
}

export interface BestOfOptions {
  helper?: string
  prompt?: string
  /**
   * A shell command run in each attempt's workspace; exit 0 passes. Sandboxed (only the
   * workspace writable, no network): it runs over code a model wrote. `{ command, sandbox: false }` runs it unconfined.
   */
  check?: CheckOption
  /** How long a check may run before its processes are stopped and it fails (default 300,000). */
  checkTimeoutMs?: number
  /** A helper given the diffs of the attempts still in the running, which names the best. */
  judge?: string
  /** Merge the winner into this directory (default true); false leaves it for `dsh workspaces merge ID`. */
  merge?: boolean
  workspace?: 'worktree' | 'copy'
  label?: string
}

export interface AttemptReport {
  index: number
  label: string
  helper: string
  model?: string
  sessionId?: string
  error?: string
  /** It changed something, so it had a workspace to judge. */
  changed: boolean
  diffstat?: string
  files?: string[]
  check?: CheckOutcome
}

export interface BestOfResult {
  /** The winning attempt (1-based), absent when none won. */
  winner?: number
  sessionId?: string
  why: string
  merged: boolean
  /** What the merge did, or why it did not. */
  mergeSummary?: string
  /** The workspace left for `dsh workspaces merge` (merge: false, or a merge that conflicted). */
  left?: string
  attempts: AttemptReport[]
  judge?: { winner?: number; why?: string; error?: string }
}

interface WorkspaceService {
  merge(childId: string): Promise<{ ok: boolean; summary: string }>
  discard(childId: string): Promise<void>
}

const MOST_ATTEMPTS = 16
const DIFF_CHARS = 20_000
const JUDGE_SCHEMA = {
  type: 'object',
  properties: { winner: { type: 'integer', minimum: 1, description: 'The number of the best attempt.' }, why: { type: 'string', description: 'Why it is the best, in a sentence or two.' } },
  required: ['winner', 'why'],
  additionalProperties: false,
}

export async function bestOf(runner: WorkflowRunner, attemptsOrCount: number | readonly BestOfAttempt[], options: BestOfOptions): Promise<BestOfResult> {
  const attempts = normalise(attemptsOrCount, options)
  const check = checkOf(options.check)
  const workspaces = runner.ctx.get('workspaces') as unknown as WorkspaceService | undefined
  if (workspaces === undefined) throw new WorkflowError('INVALID_CALL', 'bestOf(): needs @dsh/workspaces in the composition (each attempt works in a workspace of its own)')
  const label = options.label ?? 'bestOf'
  const workspace = options.workspace ?? 'worktree'
  const key = callKey({ definitionHash: 'bestOf', provider: '', model: '', prompt: JSON.stringify(attempts), options: { schema: { check: options.check, judge: options.judge, merge: options.merge }, workspace } })
  const callId = `wf-${key.slice(0, 16)}-bestof`
  const earlier = runner.settings.resumed?.completed.get(key)?.[0]
  if (earlier?.bestOf !== undefined) {
    runner.journal.started('bestOf', callId, { key, label, reused: true })
    runner.recordBestOf(callId, { ...earlier, reused: true })
    return earlier.bestOf as BestOfResult
  }
  runner.journal.started('bestOf', callId, { key, label, attempts, ...(options.check && { check: options.check }), ...(options.judge && { judge: options.judge }) })
  const reports: AttemptReport[] = attempts.map((attempt, index) => ({ index: index + 1, label: attempt.label ?? `${label} ${index + 1}/${attempts.length}`, helper: attempt.helper!, ...(attempt.model && { model: attempt.model }), changed: false }))
  const kept: string[] = []
  try {
    const settled = await Promise.allSettled(
      attempts.map((attempt, index) => runner.agent(attempt.helper!, attempt.prompt!, { workspace, label: reports[index]!.label, ...(attempt.model && { model: attempt.model }) }, { fresh: true })),
    )
    settled.forEach((outcome, index) => describeAttempt(reports[index]!, outcome, kept))
    if (runner.signal.aborted) throw runner.signal.reason
    const result = await judgeAttempts(runner, reports, settled, options, check, attempts[0]!.prompt!)
    if (result.winner !== undefined) {
      const winner = reports[result.winner - 1]!
      if (options.merge === false) {
        result.left = winner.sessionId
        result.mergeSummary = `left for you: dsh workspaces merge ${winner.sessionId}`
      } else {
        const merged = await workspaces.merge(winner.sessionId!)
        result.merged = merged.ok
        result.mergeSummary = merged.summary
        if (!merged.ok) result.left = winner.sessionId
      }
    }
    for (const id of kept) if (id !== result.left && !(result.merged && id === result.sessionId)) await workspaces.discard(id).catch(() => {})
    kept.length = 0
    runner.recordBestOf(callId, { kind: 'bestOf', key, label, stopReason: 'completed', text: result.why, bestOf: result })
    if (result.winner === undefined) runner.settings.warn(`workflow: ${label}: no winner: ${result.why}`)
    return result
  } catch (error) {
    // What was made for the attempts goes with the failure: nothing is left orphaned.
    for (const id of kept) await workspaces.discard(id).catch(() => {})
    runner.recordBestOf(callId, { kind: 'bestOf', key, label, stopReason: 'error', text: '' }, errorMessage(error))
    throw error
  }
}

function normalise(attemptsOrCount: number | readonly BestOfAttempt[], options: BestOfOptions): BestOfAttempt[] {
  let attempts: BestOfAttempt[]
  if (typeof attemptsOrCount === 'number') {
    if (!Number.isInteger(attemptsOrCount) || attemptsOrCount < 1 || attemptsOrCount > MOST_ATTEMPTS) throw new WorkflowError('INVALID_CALL', `bestOf(n): n is a whole number from 1 to ${MOST_ATTEMPTS} (got ${attemptsOrCount})`)
    attempts = Array.from({ length: attemptsOrCount }, () => ({}))
  } else if (Array.isArray(attemptsOrCount) && attemptsOrCount.length >= 1 && attemptsOrCount.length <= MOST_ATTEMPTS) attempts = attemptsOrCount.map((attempt) => ({ ...attempt }))
  else throw new WorkflowError('INVALID_CALL', `bestOf(attempts): attempts is a number or a list of 1 to ${MOST_ATTEMPTS} { helper, prompt, model } objects`)
  for (const [index, attempt] of attempts.entries()) {
    attempt.helper ??= options.helper ?? 'spawn'
    attempt.prompt ??= options.prompt
    if (typeof attempt.prompt !== 'string' || attempt.prompt.trim() === '') throw new WorkflowError('INVALID_CALL', `bestOf(): attempt ${index + 1} has no prompt (give { prompt } in the options or the attempt)`)
  }
  return attempts
}

function describeAttempt(report: AttemptReport, outcome: PromiseSettledResult<AgentAnswer>, kept: string[]): void {
  if (outcome.status === 'rejected') {
    report.error = errorMessage(outcome.reason)
    return
  }
  const answer = outcome.value
  report.sessionId = answer.sessionId
  const changes = answer.workspace
  if (changes?.kept) {
    kept.push(answer.sessionId)
    report.changed = true
    report.diffstat = changes.diffstat
    report.files = changes.files.map((file) => `${file.status} ${file.path}`)
  }
}

async function judgeAttempts(runner: WorkflowRunner, reports: AttemptReport[], settled: PromiseSettledResult<AgentAnswer>[], options: BestOfOptions, check: CheckSpec | undefined, task: string): Promise<BestOfResult> {
  const changed = reports.filter((report) => report.changed)
  const base = { merged: false, attempts: reports }
  if (changed.length === 0) return { ...base, why: `no attempt changed anything (${reports.filter((report) => report.error).length} failed)` }
  let passing = changed
  if (check !== undefined) {
    await Promise.all(
      changed.map(async (report) => {
        const answer = (settled[report.index - 1] as PromiseFulfilledResult<AgentAnswer>).value
        report.check = await runCheck(check, answer.workspace!.path, options.checkTimeoutMs ?? 300_000, runner.signal)
      }),
    )
    passing = changed.filter((report) => report.check!.passed)
    if (passing.length === 0) return { ...base, why: `no attempt passed the check \`${check.command}\` (${changed.map((report) => `${report.index}: ${report.check!.how}`).join('; ')})` }
    if (passing.length === 1 && options.judge === undefined) return won(base, passing[0]!, `the only attempt whose check \`${check.command}\` passed`)
  }
  if (options.judge === undefined) return won(base, passing[0]!, check !== undefined ? `the first of ${passing.length} attempts whose check passed` : 'no check or judge was given: the first attempt that changed something')
  if (passing.length === 1) return won(base, passing[0]!, check !== undefined ? `the only attempt whose check \`${check.command}\` passed (the judge was not needed)` : 'the only attempt that changed something (the judge was not needed)')
  const diffs = await Promise.all(passing.map(async (report) => `## Attempt ${report.index} (${report.label})\n${report.diffstat ?? ''}\n${await diffOf((settled[report.index - 1] as PromiseFulfilledResult<AgentAnswer>).value)}`))
  const prompt = [`Several attempts at one task were made. Choose the best by its diff and say why.`, `The task: ${task.slice(0, 4000)}`, ...diffs].join('\n\n')
  try {
    const verdict = await runner.agent(options.judge, prompt, { schema: JUDGE_SCHEMA, label: 'judge' }, { fresh: true })
    const { winner, why } = verdict.structured as { winner: number; why: string }
    const chosen = passing.find((report) => report.index === winner)
    if (chosen === undefined) throw new Error(`it named attempt ${winner}, which is not one of ${passing.map((report) => report.index).join(', ')}`)
    return { ...won(base, chosen, `the judge "${options.judge}" chose it${check !== undefined ? ` among the ${passing.length} whose check passed` : ''}: ${why}`), judge: { winner, why } }
  } catch (error) {
    if (runner.signal.aborted) throw error
    const judgeError = errorMessage(error)
    if (check !== undefined) return { ...won(base, passing[0]!, `the judge "${options.judge}" failed (${judgeError}); the first of the ${passing.length} attempts whose check passed wins`), judge: { error: judgeError } }
    throw new WorkflowError('NO_WINNER', `bestOf(): the judge "${options.judge}" failed and there is no check to fall back on: ${judgeError}; the attempts' workspaces were discarded`)
  }
}

function won(base: { merged: boolean; attempts: AttemptReport[] }, report: AttemptReport, why: string): BestOfResult {
  return { ...base, winner: report.index, sessionId: report.sessionId!, why: `attempt ${report.index} (${report.label}) won: ${why}` }
}

/** The attempt's changes as a diff (tracked files against HEAD, and the files it added), bounded. */
async function diffOf(answer: AgentAnswer): Promise<string> {
  const changes = answer.workspace!
  let text = await git(changes.path, ['diff', '--no-ext-diff', '--no-textconv', 'HEAD'])
  for (const file of changes.files) {
    if (file.status !== 'added' || text.includes(`b/${file.path}`)) continue
    const content = await readFile(join(changes.path, file.path), 'utf8').catch(() => '(unreadable)')
    text += `\n+++ new file ${file.path}\n${content.slice(0, 4000)}`
  }
  return text.length > DIFF_CHARS ? `${text.slice(0, DIFF_CHARS)}\n[… diff cut at ${DIFF_CHARS} characters]` : text
}

async function git(cwd: string, args: string[]): Promise<string> {
  // No hooks, filters or external drivers of a repository an attempt could have written to.
  const tree = new ProcessTree({ command: 'git', args: ['-c', 'core.hooksPath=/dev/null', '-c', 'core.fsmonitor=false', ...args], cwd, env: { ...childEnvironment(process.env), GIT_CONFIG_NOSYSTEM: '1', GIT_CONFIG_GLOBAL: '/dev/null' } })
  const output = new TailBuffer(DIFF_CHARS * 2)
  tree.child.stdout?.on('data', (chunk: Buffer) => output.push(chunk.toString('utf8')))
  tree.child.stdin?.end()
  await tree.spawned.catch(() => {})
  await tree.exited
  await tree.reap({ stdinGraceMs: 0, termGraceMs: 500 }).catch(() => {})
  return output.toString()
}
