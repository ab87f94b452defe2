/**
 * What a running process adds to the page when it serves it itself (`dsh run --ui`): the
 * approval requests waiting now, answered from the page when the page is the run's
 * front-end; the background children queued for a slot of their tree's cap; and the
 * children a budget stopped, heard as they end (before their parent has read why).
 *
 * `RunDesk` is that, over the process's context: it follows the broker's `approval/pending`
 * and `approval/settled` events (every request put to any front-end, so the page shows what
 * the terminal is asked too), registers itself as an `ApprovalFrontEnd` when it answers,
 * and reads `ctx.tasks` for queued children. The page only ever sees `PendingApproval`s: a
 * request's path, tool, shortened subject, the rule that asked and its times, never its
 * whole arguments.
 */
import type { Context } from 'cordis'
import { ANSWER_DECISIONS, type AnswerDecision, type ApprovalRequestInfo, type ApprovalSettledInfo, type FrontEndAnswer } from '@dsh/approvals'
import type {} from '@dsh/subagent'
import type {} from '@dsh/tasks'
import type {} from '@dsh/agent'

/** Who answered, as the session records it (`tool/result.permission.by`). */
export const PAGE_FRONT_END = 'the user at the dsh run --ui page'

/** The three answers a person can give, as the page posts them (the approval wire's). */
export const PAGE_DECISIONS = ANSWER_DECISIONS
export type PageDecision = AnswerDecision

/** How many settled request ids are remembered, so an answer for one of them is told how it ended. */
const REMEMBERED_SETTLED = 1000

/** A request waiting for an answer, as the page shows it. */
export interface PendingApproval {
  id: string
  /** Who asks, from the root down (`dsh`, `spawn "check"`). */
  path: string[]
  /** The in-process agent that asked, or the parent of the remote child that did. */
  agentId: string
  /** The remote child that asked, when one did. */
  child?: string
  tool: string
  /** The call's subject, shortened for one line. */
  display: string
  /** Why it is asked: a rule said ask (`rule` names it), or no rule had an opinion. */
  policy: 'ask' | 'none'
  rule?: string
  startedAt: number
  expiresAt: number
  /** Whether this page answers it (false: another front-end, a terminal, does). */
  answerable: boolean
}

/** A background child waiting for a slot of its delegation tree's cap: a `ctx.tasks` task marked queued. */
interface QueuedChild {
  taskId: string
  /** The agent (session) that delegated. */
  owner: string
  label: string
  startedAt: number
}

type AnswerOutcome = { ok: true; id: string; decision: PageDecision } | { ok: false; status: 404 | 409; error: string }

/** The running process's side of the page; `serveUi` shows it beside the session files. */
export interface LiveRun {
  /** Whether the page answers approvals (it is the run's front-end) or only shows them. */
  readonly answers: boolean
  pending(): PendingApproval[]
  queued(): QueuedChild[]
  /** Children stopped by a budget, by child id, with the diagnostic their run ended with. */
  budgetStops(): ReadonlyMap<string, string>
  /** Answer a pending request from the page. Anything not pending here changes nothing. */
  answer(id: string, decision: PageDecision): AnswerOutcome
  /** Hear that something above changed. */
  onChange(listener: () => void): () => void
}

interface RunDeskOptions {
  /** Register as the broker's front-end, so the page answers (otherwise it only shows requests). */
  answers: boolean
}

export class RunDesk implements LiveRun {
  readonly answers: boolean
  private readonly waiting = new Map<string, ApprovalRequestInfo>()
  /** Requests the broker put to this page, with how to answer each. */
  private readonly asks = new Map<string, (answer: FrontEndAnswer) => void>()
  /** How recently settled requests ended, oldest first. */
  private readonly settled = new Map<string, string>()
  private readonly stops = new Map<string, string>()
  private readonly listeners = new Set<() => void>()
  private readonly disposers: Array<() => void> = []

  constructor(private readonly ctx: Context, options: RunDeskOptions) {
    this.answers = options.answers
    this.disposers.push(
      ctx.on('approval/pending', (request) => {
        this.waiting.set(request.id, request)
        this.changed()
      }),
      ctx.on('approval/settled', (info) => this.onSettled(info)),
      ctx.on('subagent/start', () => this.changed()),
      ctx.on('subagent/end', (info) => {
        // A run the budgets stopped ends `budget` (earlier: a diagnostic starting `budget:`).
        const byBudget = (info.stopReason as string) === 'budget' || info.diagnostic?.startsWith('budget:') === true
        if (byBudget && this.stops.size < 100_000) this.stops.set(info.id, info.diagnostic ?? 'a budget was spent')
        this.changed()
      }),
    )
    const tasks = ctx.get('tasks')
    if (tasks) this.disposers.push(tasks.onSettled(() => this.changed()))
    if (options.answers) {
      const approvals = ctx.get('approvals')
      if (!approvals) throw new Error('the composition has no approval broker (@dsh/approvals), so the page could not answer approvals')
      this.disposers.push(approvals.addFrontEnd({ name: PAGE_FRONT_END, ask: (request, signal) => this.ask(request, signal) }))
    }
  }

  pending(): PendingApproval[] {
    return [...this.waiting.values()].map((request) => ({
      id: request.id,
      path: [...request.path],
      agentId: request.agentId,
      ...(request.child !== undefined && { child: request.child }),
      tool: request.tool,
      display: request.display,
      policy: request.policy,
      ...(request.rule !== undefined && { rule: request.rule }),
      startedAt: request.startedAt,
      expiresAt: request.expiresAt,
      answerable: this.asks.has(request.id),
    }))
  }

  queued(): QueuedChild[] {
    const agents = this.ctx.get('agents')
    const tasks = this.ctx.get('tasks')
    if (!agents || !tasks) return []
    const found: QueuedChild[] = []
    for (const agent of agents.list()) {
      for (const task of tasks.list(agent.id)) {
        if (task.owner === agent.id && task.kind === 'subagent' && task.queued === true) found.push({ taskId: task.id, owner: agent.id, label: task.label, startedAt: task.startedAt })
      }
    }
    return found
  }

  budgetStops(): ReadonlyMap<string, string> {
    return this.stops
  }

  answer(id: string, decision: PageDecision): AnswerOutcome {
    const resolve = this.asks.get(id)
    if (resolve !== undefined) {
      this.asks.delete(id)
      this.remember(id, `it was answered already (${decision} from this page)`)
      resolve(decision === 'reject' ? { decision, by: PAGE_FRONT_END, reason: 'rejected on the dsh run --ui page' } : { decision, by: PAGE_FRONT_END })
      return { ok: true, id, decision }
    }
    if (this.waiting.has(id)) return { ok: false, status: 409, error: `request ${id} is not asked of this page: ${this.answers ? 'another front-end' : 'the terminal or the default'} answers it` }
    const ended = this.settled.get(id)
    if (ended !== undefined) return { ok: false, status: 409, error: `request ${id} is no longer pending: ${ended}` }
    return { ok: false, status: 404, error: `no request ${id} was asked in this run` }
  }

  onChange(listener: () => void): () => void {
    this.listeners.add(listener)
    return () => this.listeners.delete(listener)
  }

  /** Stop answering (what the page was asked is withdrawn by the broker) and stop listening. */
  dispose(): void {
    for (const dispose of this.disposers.splice(0)) dispose()
    // Whatever the page was still asked is refused: nothing runs that nobody allowed.
    for (const [id, resolve] of [...this.asks]) {
      this.asks.delete(id)
      resolve({ decision: 'reject', by: PAGE_FRONT_END, reason: 'the page was closed before it was answered', source: 'cancelled' })
    }
    this.listeners.clear()
  }

  private ask(request: ApprovalRequestInfo, signal: AbortSignal): Promise<FrontEndAnswer> {
    return new Promise((resolve) => {
      const withdrawn: FrontEndAnswer = { decision: 'reject', by: PAGE_FRONT_END, reason: 'the request was withdrawn before the page answered it', source: 'cancelled' }
      if (signal.aborted) return resolve(withdrawn)
      this.asks.set(request.id, resolve)
      signal.addEventListener(
        'abort',
        () => {
          if (this.asks.delete(request.id)) resolve(withdrawn)
        },
        { once: true },
      )
      this.changed()
    })
  }

  private onSettled({ request, decision }: ApprovalSettledInfo): void {
    this.waiting.delete(request.id)
    this.asks.delete(request.id)
    const how = decision.source === 'user' ? `${decision.decision} by ${decision.by}` : decision.source === 'timeout' ? 'nobody answered in time, so it was rejected' : decision.source === 'cancelled' ? 'it was withdrawn (its call was cancelled)' : `${decision.decision} (${decision.source ?? 'decided'})`
    this.remember(request.id, how)
    this.changed()
  }

  private remember(id: string, how: string): void {
    this.settled.delete(id)
    this.settled.set(id, how)
    if (this.settled.size > REMEMBERED_SETTLED) this.settled.delete(this.settled.keys().next().value!)
  }

  private changed(): void {
    for (const listener of this.listeners) {
      try {
        listener()
      } catch {
        // A page's stream that went away is not the run's problem.
      }
    }
  }
}
