/**
 * `ctx.approvals`: the approval broker. Every side effect of every agent in this process,
 * and every side effect a remote child asks its provider about, comes here once:
 *
 * 1. the policy: the permission levels the asking agent is under (its ancestors', its
 *    process's `allow` / `ask` / `deny`, its helper definition's) give a verdict, the most
 *    restrictive winning: `deny` rejects, `allow` runs unasked;
 * 2. a replay answers what its recording decided;
 * 3. an "always" answer given earlier in the same tree answers the same request again;
 * 4. otherwise whoever is there to ask (the front-end that serves the request: a terminal,
 *    an ACP client, an A2A caller, the web page) is asked, one request at a time where it
 *    shows one at a time, fairly between asking agents, with a time limit;
 * 5. with nobody to ask, the default decides (`reject` unless configured otherwise), and a
 *    request a rule says to ask about is rejected. In a tree served for a parent in another
 *    process the default never allows more than the one its lineage carried (`defaultFor`).
 *
 * Pending requests are bounded per agent and in all, visible (`pending`, `waitingUnder`,
 * the `approval/pending` and `approval/settled` events) and withdrawn at once when their
 * call is cancelled. The broker's own permission gate on `ctx.tools` brings every
 * in-process side-effecting call here; providers call `request` for their remote children.
 */
import { Context, Service } from 'cordis'
import Schema from 'schemastery'
import { errorMessage, isRecord, type PermissionDecision } from '@dsh/base'
import { serviceInstance, type Agent } from '@dsh/agent'
import { cleanPermissionLevel, joinPermissionLevels, permissionLevelProblem, type PermissionLevel } from '@dsh/session'
import type { ToolPermissionRequest } from '@dsh/tools'
import { ApprovalError } from './errors.js'
import { FairQueue } from './fair-queue.js'
import { policyVerdict, type PolicyVerdict } from './rules.js'
import { displaySubject, subjectDigest, subjectOf } from './subject.js'
import { receivedAskUp, receivesAskUpFor, receivedDefault, receivedLevels, unaskedReason, type DefaultDecision, type TreeDefault } from './lineage.js'
import { VerdictSources, type ApprovalVerdictSource } from './sources.js'
import type { ApprovalAsk, ApprovalFrontEnd, ApprovalRecorder, ApprovalRequestInfo, ApprovalSettledInfo } from './types.js'
import { answerDecision } from './wire.js'
import { describeRequest } from './describe.js'

declare module 'cordis' {
  interface Context {
    approvals: ApprovalService
  }
  interface Events {
    /** A request waits for someone to answer it (a front-end was asked). */
    'approval/pending'(request: ApprovalRequestInfo): void
    /** A request that waited was answered, timed out or withdrawn. */
    'approval/settled'(info: ApprovalSettledInfo): void
  }
}

/** The longest an unanswered request may be configured to wait: a week. */
const MAX_TIMEOUT_MS = 7 * 24 * 3600 * 1000

interface Pending {
  info: ApprovalRequestInfo
  requester: string
  settle(decision: PermissionDecision): void
  /** Aborted when the request is settled without the front-end: it stops asking. */
  withdrawn: AbortController
  settled: boolean
  /** Takes it out of a one-at-a-time front-end's line (when it waits in one). */
  leaveLine?: () => void
}

export class ApprovalService extends Service {
  static inject = ['tools']
  static Config: Schema<ApprovalService.Config> = Schema.object({
    allow: Schema.array(Schema.string()).default([]).description('Rules of side effects that run unasked: a tool name, or a tool with a pattern of its subject ("bash(npm test*)").'),
    ask: Schema.array(Schema.string()).default([]).description('Rules of side effects always asked about, even where another level allows them.'),
    deny: Schema.array(Schema.string()).default([]).description('Rules of side effects refused anywhere in the tree.'),
    default: Schema.union(['reject', 'allow']).default('reject').description('With nobody to ask, what happens to a request no rule decided.'),
    timeoutMs: Schema.natural().min(1).max(MAX_TIMEOUT_MS).default(300_000).description('How long a request waits for an answer before it is rejected.'),
    maxPendingPerAgent: Schema.natural().min(1).max(10_000).default(16).description('Most requests one agent may have waiting; more are rejected at once.'),
    maxPending: Schema.natural().min(1).max(100_000).default(256).description('Most requests waiting in all.'),
  })

  /** The level of this process's config (`allow` / `ask` / `deny`), when it has rules. */
  private readonly configLevels: readonly PermissionLevel[]
  private readonly sources = new VerdictSources()
  private readonly config: ApprovalService.Config
  private frontEnds: ApprovalFrontEnd[] = []
  private recorders: ApprovalRecorder[] = []
  /** `dsh run --permission allow|reject`: the default and who set it, over the config's. */
  private defaultOverride: { decision: DefaultDecision; by: string } | undefined
  private readonly waiting = new Map<string, Pending>()
  private readonly perRequester = new Map<string, number>()
  /** `tree\0tool\0subject` of requests answered "always", per tree. */
  private readonly always = new Set<string>()
  private readonly lines = new WeakMap<ApprovalFrontEnd, FairQueue>()
  private counter = 0
  private readonly home: Context

  constructor(ctx: Context, config: Partial<ApprovalService.Config> = {}) {
    super(ctx, 'approvals')
    this.home = ctx
    this.config = {
      allow: config.allow ?? [],
      ask: config.ask ?? [],
      deny: config.deny ?? [],
      default: config.default ?? 'reject',
      timeoutMs: config.timeoutMs ?? 300_000,
      maxPendingPerAgent: config.maxPendingPerAgent ?? 16,
      maxPending: config.maxPending ?? 256,
    }
    const own = cleanPermissionLevel({ from: 'config', allow: this.config.allow, ask: this.config.ask, deny: this.config.deny })
    const problem = permissionLevelProblem(own, 'approvals')
    if (problem) throw new ApprovalError('INVALID_CONFIG', problem)
    this.configLevels = joinPermissionLevels(undefined, [own]) ?? []
    // Tools without side effects come here only for a call a verdict source takes (a PreToolUse hook matching read).
    // (or one an ancestor in another process decides itself: its askUp level names the tool).
    ctx.tools.addPermissionGate((request) => this.gate(request), { alsoFor: (tool, agent) => (this.sources.size > 0 && this.sources.takes(tool)) || this.receivesAskUpFor(agent, tool) })
    ctx.effect(() => () => this.withdrawAll('the approval broker stopped'), 'approvals: reject what still waits')
  }

  /**
   * Let `frontEnd` answer the requests it serves (the most recently added one that serves
   * a request is asked). An effect of the calling context; returns its disposer. Requests
   * it is asking when removed stay with it until it answers or they time out.
   */
  addFrontEnd(frontEnd: ApprovalFrontEnd): () => void {
    if (typeof frontEnd?.ask !== 'function' || typeof frontEnd.name !== 'string') throw new ApprovalError('INVALID_FRONT_END', 'a front-end needs a name and an ask function')
    return this.ctx.effect(() => {
      this.frontEnds = [...this.frontEnds, frontEnd]
      return () => {
        this.frontEnds = this.frontEnds.filter((entry) => entry !== frontEnd)
      }
    }, `approvals.addFrontEnd(${frontEnd.name})`)
  }

  /**
   * This process's own levels, which every child started here carries: its config's rules,
   * and the `askUp` level of the verdict sources' calls (so a child in another process asks
   * up for them). Empty when there are none.
   */
  get ownLevels(): readonly PermissionLevel[] {
    const askUp = this.sources.askUpLevel()
    return askUp === undefined ? this.configLevels : [...this.configLevels, askUp]
  }

  /**
   * Let `source` decide the calls it takes, inside `decide`, before anyone is asked (see
   * `ApprovalVerdictSource`). An effect of the calling context; returns its disposer. Add it
   * while the composition starts: the children started before it do not carry its `askUp`.
   */
  addVerdictSource(source: ApprovalVerdictSource): () => void {
    return this.ctx.effect(() => this.sources.add(source), `approvals.addVerdictSource(${source.name})`)
  }

  /** Record and replay decisions (see `ApprovalRecorder`). An effect of the calling context. */
  addRecorder(recorder: ApprovalRecorder): () => void {
    return this.ctx.effect(() => {
      this.recorders = [...this.recorders, recorder]
      return () => {
        this.recorders = this.recorders.filter((entry) => entry !== recorder)
      }
    }, 'approvals.addRecorder()')
  }

  /**
   * The decision when nobody is there to ask, set by a host for its run (`dsh run
   * --permission allow`); `by` names it in the record. Returns the disposer.
   */
  setDefault(decision: DefaultDecision, by: string): () => void {
    const override = { decision, by }
    this.defaultOverride = override
    return () => {
      if (this.defaultOverride === override) this.defaultOverride = undefined
    }
  }

  /**
   * With nobody to ask, what happens in `agent`'s tree to a side effect no rule decided:
   * this process's default (`setDefault`, else the config's). In a tree this process serves
   * for a parent elsewhere it is bounded by the default the tree's lineage carried (its
   * header's `approvalDefault`, the most restrictive of its ancestors'): a child never allows
   * more than its ancestors do. A lineage that carried none allows nothing this way.
   */
  defaultFor(agent: { id: string }): TreeDefault {
    const own = this.defaultOverride ?? { decision: this.config.default, by: 'the default (nobody to ask)' }
    if (own.decision === 'reject') return own
    const found = this.agentOf(agent)
    if (found === undefined) return { decision: 'reject', by: 'the approval broker' }
    const received = receivedDefault(found)
    if (received === undefined || received === 'allow') return own
    return { decision: 'reject', by: received === 'reject' ? "the delegation tree's root (its lineage)" : 'the approval broker', bound: received === 'reject' ? 'lineage' : 'unsaid' }
  }

  /** Requests waiting for an answer, oldest first. */
  pending(): ApprovalRequestInfo[] {
    return [...this.waiting.values()].map((entry) => entry.info)
  }

  /** Requests waiting from `id` (an agent or a remote child) or anyone below it. */
  waitingUnder(id: string): ApprovalRequestInfo[] {
    const found: ApprovalRequestInfo[] = []
    for (const entry of this.waiting.values()) if (entry.info.chain.includes(id)) found.push(entry.info)
    return found
  }

  /**
   * What `id` (an agent or a remote child) waits on, in a few words for a person or a
   * model (`task_list`, `list_agents`): `an approval of bash npm test, asked by spawn
   * "check" (38 s so far)`, naming the oldest request and how many more; `undefined` when
   * nothing below it waits.
   */
  waitingNote(id: string): string | undefined {
    const waiting = this.waitingUnder(id)
    if (waiting.length === 0) return undefined
    const first = waiting[0]!
    const asker = first.path.at(-1) ?? 'an agent'
    const more = waiting.length > 1 ? `, and ${waiting.length - 1} more` : ''
    return `an approval of ${first.tool} ${displaySubject(first.subject, 120)}, asked by ${asker} (${Math.round((Date.now() - first.startedAt) / 1000)} s so far; rejected if nobody answers within ${Math.round((first.expiresAt - first.startedAt) / 1000)} s)${more}`
  }

  /**
   * The levels `agent` is under: those its session header carries (its ancestors', its
   * helper's), then this process's own.
   */
  levelsOf(agent: Agent, more?: readonly PermissionLevel[]): readonly PermissionLevel[] {
    return joinPermissionLevels(joinPermissionLevels(agent.session.header.permissions, this.ownLevels), more) ?? []
  }

  /** Decide one side effect. Never rejects: every failure is a `reject` decision saying why. */
  request(ask: ApprovalAsk): Promise<PermissionDecision> {
    // The service itself, not the context's tracing proxy of it: a proxy costs every field
    // read of the decision (tens of µs per request, which every side effect would pay).
    return serviceInstance(this).decideSafely(ask)
  }

  private async decideSafely(ask: ApprovalAsk): Promise<PermissionDecision> {
    try {
      return await this.decide(ask)
    } catch (error) {
      return { decision: 'reject', by: 'the approval broker', reason: `the request could not be decided: ${errorMessage(error)}`, source: 'default', at: Date.now() }
    }
  }

  private gate(request: ToolPermissionRequest): Promise<PermissionDecision> {
    const agent = this.agentOf(request.agent)
    if (agent === undefined) {
      return Promise.resolve({ decision: 'reject', by: 'the approval broker', reason: 'the calling agent is not known to this process', source: 'default', at: Date.now() })
    }
    return this.decideSafely({ agent, tool: request.tool.name, args: request.call.args, signal: request.signal, callId: request.call.id, ...(!request.tool.sideEffecting && { sideEffect: false as const }) })
  }

  private receivesAskUpFor(toolAgent: { id: string }, tool: string): boolean {
    const agent = this.agentOf(toolAgent)
    return agent !== undefined && receivesAskUpFor(agent, tool)
  }

  /** The full `Agent` behind a tool call's agent (the loop passes it; a bare id is looked up). */
  private agentOf(toolAgent: { id: string }): Agent | undefined {
    if (isAgent(toolAgent)) return toolAgent
    const agents = this.home.get('agents')
    return agents ? serviceInstance(agents).get(toolAgent.id) : undefined
  }

  private async decide(ask: ApprovalAsk): Promise<PermissionDecision> {
    const { agent } = ask
    const subject = subjectOf(ask.args)
    const tool = ask.tool
    // A call without side effects is the verdict sources' alone: no rule, default or memory decides it.
    let policy: Decided = ask.sideEffect === false ? upTreeOnly(receivedAskUp(agent, { tool: ask.tool, subject })) : this.verdictOf(ask, subject)
    const now = Date.now()
    let info = describeRequest(ask, subject, policy, `approval-${++this.counter}`, now, now + this.config.timeoutMs)
    const session = agent.session.id
    const finish = (decision: PermissionDecision): PermissionDecision => {
      this.recordDecision(ask, info, decision)
      return decision
    }
    if (policy.verdict === 'deny') return finish({ decision: 'reject', by: 'the policy', reason: `the rule ${policy.rule} denies it`, source: 'rule', rule: policy.rule!, at: now })
    // The verdict sources (PreToolUse hooks), before anyone is asked: a deny refuses, an ask is asked, an allow objects to nothing.
    const said = this.sources.size > 0 && this.sources.takes(tool) ? await this.sources.verdict(info, agent, ask.signal) : undefined
    if (said?.verdict === 'deny') return finish({ decision: 'reject', by: said.by, reason: said.reason ?? `${said.by} denies it`, source: 'rule', at: Date.now() })
    if (said?.verdict === 'ask') {
      const askedBy = said.reason === undefined ? said.by : `${said.by} (${said.reason})`
      policy = { verdict: 'ask', askedBy, ...(policy.upTree !== undefined && { upTree: policy.upTree }) }
      info = { ...info, policy: 'ask', rule: askedBy }
    } else if (ask.sideEffect === false && policy.upTree === undefined) return { decision: 'allow-once', by: said?.by ?? 'no PreToolUse hook objected', source: 'rule', at: Date.now() }
    if (policy.verdict === 'allow') return finish({ decision: 'allow-once', by: 'the policy', source: 'rule', rule: policy.rule!, at: now })
    for (const recorder of this.recorders) {
      const replayed = recorder.replay?.(info, session)
      if (replayed !== undefined) return finish({ ...replayed, source: 'replay', at: now })
    }
    // The whole subject, hashed (past what rules read, too): an answer for one command never covers another that starts alike.
    const memory = `${info.chain[0]}\0${tool}\0${subjectDigest(subject)}`
    // A rule that asks is asked every time, and so is what an ancestor's sources decide: an earlier "always" does not answer for it.
    if (policy.verdict !== 'ask' && policy.upTree === undefined && this.always.has(memory)) return finish({ decision: 'allow-always', by: 'an earlier answer in this tree', source: 'remembered', at: now })
    if (ask.signal.aborted) return finish({ decision: 'reject', by: 'the approval broker', reason: 'the call was cancelled before it could be asked about', source: 'cancelled', at: now })
    const frontEnd = this.frontEndFor(info)
    if (frontEnd === undefined) return finish(this.unasked(policy, now, agent))
    // Counted and queued per agent of this process or remote child: what a remote child says
    // is below it names, but never multiplies, its share (a hostile child could invent names).
    const decision = await this.wait(info, frontEnd, ask.signal, info.chain.join('/'))
    if (decision.decision === 'allow-always') this.always.add(memory)
    return finish(decision)
  }

  /**
   * The policy's verdict, never more permissive than a remote child's own. In a tree this
   * process serves for a parent elsewhere, what only this process's own levels allow (its
   * config, its helpers) is no verdict: it is asked up the tree, unless the levels the tree
   * received from its ancestors allow it too. A child can never do more than they allow.
   */
  private verdictOf(ask: ApprovalAsk, subject: ReturnType<typeof subjectOf>): Decided {
    const levels = this.levelsOf(ask.agent, ask.remote?.levels)
    const call = { tool: ask.tool, subject }
    let policy: Decided = levels.length === 0 ? { verdict: undefined } : policyVerdict(levels, call)
    const received = policy.verdict === 'allow' ? receivedLevels(ask.agent) : undefined
    if (received !== undefined && policyVerdict(received, call).verdict !== 'allow') policy = { verdict: undefined }
    const theirs = ask.remote?.verdict
    if (theirs === 'deny') return { verdict: 'deny', rule: 'the child\'s own policy' }
    if (theirs === 'ask' && policy.verdict !== 'deny') policy = { verdict: 'ask', ...(policy.verdict === 'ask' && policy.rule !== undefined && { rule: policy.rule }) }
    if (policy.verdict === 'deny') return policy
    // An ancestor in another process decides this call itself (its PreToolUse hooks): asked up, never allowed here unasked.
    const upTree = receivedAskUp(ask.agent, call)
    return upTree === undefined ? policy : { verdict: policy.verdict === 'allow' ? undefined : policy.verdict, ...(policy.verdict === 'ask' && policy.rule !== undefined && { rule: policy.rule }), upTree }
  }

  private unasked(policy: Decided, at: number, agent: Agent): PermissionDecision {
    if (policy.askedBy !== undefined) return { decision: 'reject', by: 'the approval broker', reason: `${policy.askedBy} asks about it, and nobody is there to ask`, source: 'default', at }
    if (policy.upTree !== undefined) return { decision: 'reject', by: 'the approval broker', reason: `an ancestor in another process decides it itself (its PreToolUse hooks take ${policy.upTree}), and nobody is there to ask up the tree (a dsh worker never can; dsh acp asks its client, dsh a2a serve its approver or trusted caller); narrow the root's PreToolUse matchers, or delegate such work where it can ask up`, source: 'default', at }
    if (policy.verdict === 'ask') {
      return { decision: 'reject', by: 'the approval broker', reason: `${policy.rule !== undefined ? `the rule ${policy.rule}` : 'its policy'} asks about it, and nobody is there to ask`, source: 'default', at, ...(policy.rule !== undefined && { rule: policy.rule }) }
    }
    const chosen = this.defaultFor(agent)
    if (chosen.decision === 'allow') return { decision: 'allow-once', by: chosen.by, source: 'default', at }
    return { decision: 'reject', by: chosen.by, reason: unaskedReason(chosen, this.defaultOverride?.by ?? 'approvals.default allow'), source: 'default', at }
  }

  private frontEndFor(info: ApprovalRequestInfo): ApprovalFrontEnd | undefined {
    for (let index = this.frontEnds.length - 1; index >= 0; index--) {
      const frontEnd = this.frontEnds[index]!
      try {
        if (frontEnd.serves === undefined || frontEnd.serves(info)) return frontEnd
      } catch {
        // A front-end that cannot tell serves nothing.
      }
    }
    return undefined
  }

  /** Put `info` to `frontEnd` and wait: bounded, timed, withdrawn with its signal. */
  private wait(info: ApprovalRequestInfo, frontEnd: ApprovalFrontEnd, signal: AbortSignal, requester: string): Promise<PermissionDecision> {
    const ownCount = this.perRequester.get(requester) ?? 0
    if (ownCount >= this.config.maxPendingPerAgent) {
      return Promise.resolve({ decision: 'reject', by: 'the approval broker', reason: `this agent already has ${ownCount} requests waiting for an answer (approvals.maxPendingPerAgent); wait for them before asking again`, source: 'limit', at: Date.now() })
    }
    if (this.waiting.size >= this.config.maxPending) {
      return Promise.resolve({ decision: 'reject', by: 'the approval broker', reason: `${this.waiting.size} requests are already waiting for an answer (approvals.maxPending)`, source: 'limit', at: Date.now() })
    }
    return new Promise<PermissionDecision>((resolve) => {
      const withdrawn = new AbortController()
      const entry: Pending = {
        info,
        requester,
        withdrawn,
        settled: false,
        settle: (decision) => {
          if (entry.settled) return
          entry.settled = true
          entry.leaveLine?.()
          clearTimeout(timer)
          signal.removeEventListener('abort', onAbort)
          this.waiting.delete(info.id)
          const left = (this.perRequester.get(requester) ?? 1) - 1
          if (left > 0) this.perRequester.set(requester, left)
          else this.perRequester.delete(requester)
          if (decision.source !== 'user') withdrawn.abort(new Error(decision.decision === 'reject' ? decision.reason : 'decided elsewhere'))
          this.emit('approval/settled', { request: info, decision })
          resolve(decision)
        },
      }
      const timer = setTimeout(() => {
        const seconds = Math.round(this.config.timeoutMs / 1000)
        entry.settle({ decision: 'reject', by: 'the approval broker', reason: `nobody answered within ${seconds} s (approvals.timeoutMs), so it was rejected`, source: 'timeout', at: Date.now() })
        this.tellParentOfTimeout(info)
      }, Math.max(0, info.expiresAt - Date.now()))
      timer.unref?.()
      const onAbort = () => entry.settle({ decision: 'reject', by: 'the approval broker', reason: 'the call was cancelled while it waited for an answer', source: 'cancelled', at: Date.now() })
      signal.addEventListener('abort', onAbort, { once: true })
      this.waiting.set(info.id, entry)
      this.perRequester.set(requester, ownCount + 1)
      this.emit('approval/pending', info)
      const put = () => this.putTo(frontEnd, entry)
      if (frontEnd.oneAtATime) {
        const line = this.lineOf(frontEnd)
        const queued = { requester, get open() { return !entry.settled }, run: put }
        line.add(queued)
        // Withdrawn before its turn: out of the line at once, so withdrawn requests hold no memory.
        entry.leaveLine = () => line.remove(queued)
      } else void put()
    })
  }

  private lineOf(frontEnd: ApprovalFrontEnd): FairQueue {
    let line = this.lines.get(frontEnd)
    if (!line) {
      line = new FairQueue()
      this.lines.set(frontEnd, line)
    }
    return line
  }

  /** One exchange with the front-end; its answer is checked, its failure is a rejection. */
  private async putTo(frontEnd: ApprovalFrontEnd, entry: Pending): Promise<void> {
    if (entry.settled) return
    let answer: unknown
    try {
      answer = await frontEnd.ask(entry.info, entry.withdrawn.signal)
    } catch (error) {
      entry.settle({ decision: 'reject', by: frontEnd.name, reason: entry.withdrawn.signal.aborted ? 'the request was withdrawn' : `asking ${frontEnd.name} failed: ${errorMessage(error)}`, source: 'user', at: Date.now() })
      return
    }
    entry.settle(answerDecision(answer, frontEnd.name))
  }

  /** Every decision to the recorders; a remote child's (which keeps no session here) also into its parent's session. */
  private recordDecision(ask: ApprovalAsk, info: ApprovalRequestInfo, decision: PermissionDecision): void {
    for (const recorder of this.recorders) {
      try {
        recorder.record?.(info, ask.agent.session.id, decision)
      } catch (error) {
        this.home.logger('approvals').warn('an approval recorder failed (ignored): %s', errorMessage(error))
      }
    }
    if (ask.remote?.record !== true) return
    const { session } = ask.agent
    if (session.released) return
    try {
      session.append({ type: 'approval', request: { path: [...info.path], tool: info.tool, subject: info.display, ...(info.child !== undefined && { child: info.child }) }, permission: decision })
    } catch (error) {
      this.home.logger('approvals').warn('an approval could not be recorded in session %s: %s', session.id, errorMessage(error))
    }
  }

  /** A request of a child that nobody answered: its parent hears of it, as a notice it reads at its next step. */
  private tellParentOfTimeout(info: ApprovalRequestInfo): void {
    const tasks = this.home.get('tasks')
    const agents = this.home.get('agents')
    if (!tasks || !agents || info.chain.length < 2) return
    // The agent that delegated to the asker: the next to last of the chain, for an in-process asker and a remote child alike.
    const parentId = info.chain[info.chain.length - 2]!
    const parent = serviceInstance(agents).get(parentId)
    if (!parent) return
    const who = info.path.slice(1).join(' › ') || 'a child'
    const text = `${who} asked to run ${info.tool} (${info.display}); nobody answered within ${Math.round(this.config.timeoutMs / 1000)} s, so it was rejected and the child went on without it.`
    try {
      serviceInstance(tasks).notices.post(parent, { role: 'user', content: [{ type: 'text', text }] }, { durable: true })
    } catch (error) {
      this.home.logger('approvals').warn('the parent could not be told of a timed-out approval: %s', errorMessage(error))
    }
  }

  private withdrawAll(why: string): void {
    for (const entry of [...this.waiting.values()]) entry.settle({ decision: 'reject', by: 'the approval broker', reason: why, source: 'cancelled', at: Date.now() })
  }

  private emit(name: 'approval/pending', payload: ApprovalRequestInfo): void
  private emit(name: 'approval/settled', payload: ApprovalSettledInfo): void
  private emit(name: string, payload: unknown): void {
    try {
      ;(this.home.emit as (name: string, payload: unknown) => void)(name, payload)
    } catch (error) {
      this.home.logger('approvals').warn('an %s listener failed (ignored): %s', name, errorMessage(error))
    }
  }
}

/** The policy's verdict, and the `askUp` rule when an ancestor in another process decides the call itself. */
type Decided = PolicyVerdict & { upTree?: string; askedBy?: string }

/** No verdict, but asked up the tree when an ancestor elsewhere decides the call itself (`upTree`, its askUp rule). */
function upTreeOnly(upTree: string | undefined): Decided {
  return upTree === undefined ? { verdict: undefined } : { verdict: undefined, upTree }
}

function isAgent(value: { id: string }): value is Agent {
  return isRecord(value) && 'session' in value && 'depth' in value
}

export namespace ApprovalService {
  export interface Config {
    allow: string[]
    ask: string[]
    deny: string[]
    default: DefaultDecision
    timeoutMs: number
    maxPendingPerAgent: number
    maxPending: number
  }
}

export default ApprovalService
