/**
 * Admission: whether a delegation may start, decided before anything exists (an agent, a
 * session, a process, a remote task), in one place for every kind of child.
 *
 * - `admit` is what `ctx.subagents.start` and `startContinuable` ask: the provider is
 *   registered, the request is well formed, the parent is live, the provider supports
 *   every start-time feature asked for, the depth bound holds.
 * - `refuseUnstartable` is what the one in-process child factory and the one remote
 *   lifecycle ask again before they create anything, for callers that reach a provider
 *   directly: a cancelled delegation, a parent going away, the depth bound.
 * - `firstUnsupportedFeature` is the one capability check, which `admit` applies and the
 *   subagent and helper tools ask of what their config and definitions will request.
 * - `admitDepth` is the depth bound's one rule, also for a child that arrives from another
 *   process (`dsh acp`'s `session/new`, `dsh a2a serve`'s task) with its lineage.
 */
import type { Agent } from '@dsh/agent'
import { DELEGATION_BUDGET_LIMITS } from '@dsh/session'
import { SubagentError } from './errors.js'
import type { SubagentCapabilities, SubagentFeature, SubagentProvider, SubagentRequest } from './types.js'

/**
 * The depth bound where nothing sets one and the admitting side can enforce it: a root
 * (depth 0) and three generations below it. The subagent tool's default, and `dsh acp`'s
 * and `dsh a2a serve`'s own bound.
 */
export const DEFAULT_MAX_DEPTH = 3

/** How a depth-limit refusal names the child and the bound it broke. */
export interface DepthWords {
  /** The child, with its verb: "a child of X would be", "this session would be", "this task would run". */
  subject: string
  /** The bound: the admitting side's own (`own`) or the one the delegating parent inherited. */
  bound(maxDepth: number, whose: 'own' | 'inherited'): string
}

/**
 * The depth bound's one rule: a child at `depth` is refused (`DEPTH_LIMIT`) when it is
 * deeper than the tighter of `own` (the admitting side's bound) and `inherited` (the one
 * its parent's delegation carried). Returns that tighter bound, which the child records
 * and passes on, so a bound set once holds for every descendant in every process.
 */
export function admitDepth(depth: number, own: number | undefined, inherited: number | undefined, words: DepthWords): number | undefined {
  const bound = tighterBound(own, inherited)
  if (bound !== undefined && depth > bound) {
    throw new SubagentError(
      'DEPTH_LIMIT',
      `delegation depth limit reached: ${words.subject} at depth ${depth}, above ${words.bound(bound, bound === own ? 'own' : 'inherited')}; do this work yourself instead of delegating`,
    )
  }
  return bound
}

/** The tighter of two absolute depth bounds, either of which may be absent. */
export function tighterBound(a: number | undefined, b: number | undefined): number | undefined {
  if (a === undefined) return b
  return b === undefined ? a : Math.min(a, b)
}

/**
 * The absolute depth bound a delegation from `request.parent` must respect: the
 * request's own and the one the parent inherited (its header's `maxDepth`), whichever is
 * tighter.
 */
export function effectiveMaxDepth(request: Pick<SubagentRequest, 'parent' | 'maxDepth'>): number | undefined {
  return tighterBound(request.maxDepth, request.parent.session.header.maxDepth)
}

/** The depth check of a child of `request.parent`; returns the effective bound. */
function admitChildDepth(request: Pick<SubagentRequest, 'parent' | 'maxDepth'>): number | undefined {
  const { parent } = request
  const inherited = parent.session.header.maxDepth
  const bound = tighterBound(request.maxDepth, inherited)
  const depth = parent.depth + 1
  // Admitted (every child of a fan-out, twice): no words are built for a refusal that is not made.
  if (bound === undefined || depth <= bound) return bound
  return admitDepth(depth, request.maxDepth, inherited, {
    subject: `a child of ${parent.id} would be`,
    bound: (maxDepth, whose) => `maxDepth ${maxDepth}${whose === 'own' ? '' : ` (inherited by ${parent.id} from its delegation)`}`,
  })
}

/** A parent that is disposing or disposed cannot own a child: it would outlive the parent's clean-up. */
export function refuseDisposedParent(parent: Agent): void {
  if (parent.status === 'disposing' || parent.status === 'disposed') {
    throw new SubagentError('PARENT_DISPOSED', `agent ${parent.id} is ${parent.status}: a disposed agent cannot delegate; start the work from a live agent`)
  }
}

/**
 * Throws the reason `request` must not start a child (`ABORTED`, `PARENT_DISPOSED`,
 * `DEPTH_LIMIT`); returns the effective depth bound the child records.
 */
export function refuseUnstartable(request: Pick<SubagentRequest, 'parent' | 'signal' | 'maxDepth'>, childName: string): number | undefined {
  const { parent, signal } = request
  if (signal.aborted) throw new SubagentError('ABORTED', `the delegation was cancelled before ${childName} was started`, { cause: signal.reason })
  refuseDisposedParent(parent)
  return admitChildDepth(request)
}

/**
 * The one admission of `ctx.subagents`, before the provider is asked for anything; returns
 * the provider and the effective depth bound. Not async and allocation-free on success:
 * every child of a fan-out passes here.
 */
export function admit(providers: ReadonlyMap<string, SubagentProvider>, name: string, request: SubagentRequest): { provider: SubagentProvider; maxDepth: number | undefined } {
  const provider = providers.get(name)
  if (!provider) {
    const known = [...providers.keys()]
    throw new SubagentError('NO_PROVIDER', `no subagent provider named "${name}" (registered: ${known.length ? known.join(', ') : 'none'})`)
  }
  validateRequest(request)
  refuseDisposedParent(request.parent)
  const unsupported = firstUnsupportedFeature(request, provider.capabilities)
  if (unsupported !== undefined) {
    throw new SubagentError('UNSUPPORTED_CAPABILITY', `subagent provider "${name}" does not support ${unsupported}; drop it from the request or use a provider that does`)
  }
  // The bound a parent inherited holds even when this request sets none or a looser one.
  return { provider, maxDepth: admitChildDepth(request) }
}

function invalid(message: string): SubagentError {
  return new SubagentError('INVALID_REQUEST', message)
}

/**
 * What of a delegation the capability check reads: a request, or what a tool's config or a
 * helper's definition will put in the requests it makes (checked when they are mounted,
 * before any call). A `parent` is confined when its header has a sandbox.
 */
export interface RequestedFeatures {
  outputSchema?: unknown
  maxDepth?: number
  toolFilter?: unknown
  persona?: unknown
  workspace?: 'shared' | 'worktree' | 'copy'
  sandbox?: boolean | 'no-network'
  parent?: { readonly session: { readonly header: { readonly sandbox?: unknown } } }
}

/**
 * The one capability check: the first start-time feature `request` asks for that
 * `capabilities` lacks, in a fixed order (outputSchema, depthLimit, toolFilter, persona,
 * workspace, sandbox), or undefined. `admit` refuses a request by it; the subagent tool and
 * the helper tool ask it of their config and definitions to say so in their own words.
 * Checked without building a list: every child of a fan-out passes here.
 */
export function firstUnsupportedFeature(request: RequestedFeatures, capabilities: Readonly<SubagentCapabilities>): SubagentFeature | undefined {
  if (request.outputSchema !== undefined && !capabilities.outputSchema) return 'outputSchema'
  if (request.maxDepth !== undefined && !capabilities.depthLimit) return 'depthLimit'
  if (request.toolFilter !== undefined && !capabilities.toolFilter) return 'toolFilter'
  if (request.persona !== undefined && !capabilities.persona) return 'persona'
  if (request.workspace !== undefined && request.workspace !== 'shared' && !capabilities.workspace) return 'workspace'
  if (request.sandbox !== undefined && request.sandbox !== false && !capabilities.sandbox) return 'sandbox'
  // A confined agent's children are confined too: one the provider cannot confine would be a way out.
  if (request.parent !== undefined && request.parent.session.header.sandbox !== undefined && !capabilities.sandbox) return 'sandbox'
  return undefined
}

/** Malformed start-time inputs, caught before any provider sees them. */
function validateRequest(request: SubagentRequest): void {
  if (!Array.isArray(request.prompt) || request.prompt.length === 0) throw invalid('the prompt must be a non-empty list of content blocks')
  if (!request.parent) throw invalid('a request needs the delegating `parent` agent')
  if (!(request.signal instanceof AbortSignal)) throw invalid('a request needs an AbortSignal `signal`')
  const { maxDepth, outputSchema, toolFilter, persona } = request
  if (maxDepth !== undefined && (!Number.isInteger(maxDepth) || maxDepth < 0)) {
    throw invalid(`maxDepth must be a whole number of at least 0 (got ${String(maxDepth)})`)
  }
  if (outputSchema !== undefined && (typeof outputSchema !== 'object' || outputSchema === null || Array.isArray(outputSchema))) {
    throw invalid('outputSchema must be a JSON Schema object')
  }
  if (toolFilter !== undefined) {
    const lists = [toolFilter.allow, toolFilter.deny].filter((list) => list !== undefined)
    if (lists.length === 0) throw invalid('toolFilter needs `allow` or `deny`')
    if (lists.some((list) => !Array.isArray(list) || list.some((name) => typeof name !== 'string'))) throw invalid('toolFilter lists must be lists of tool names')
    if (toolFilter.allow === undefined && toolFilter.deny!.length === 0) throw invalid('toolFilter has an empty `deny` list and no `allow`: it filters nothing')
  }
  if (persona !== undefined && (typeof persona !== 'string' || !persona.trim())) throw invalid('persona must be non-empty text')
  const { workspace, sandbox } = request
  if (workspace !== undefined && workspace !== 'shared' && workspace !== 'worktree' && workspace !== 'copy') throw invalid(`workspace must be shared, worktree or copy (got ${JSON.stringify(workspace)})`)
  if (sandbox !== undefined && sandbox !== true && sandbox !== false && sandbox !== 'no-network') throw invalid(`sandbox must be true, false or "no-network" (got ${JSON.stringify(sandbox)})`)
  const { budget } = request
  if (budget !== undefined) {
    for (const [limit, value] of Object.entries(budget)) {
      if (!(DELEGATION_BUDGET_LIMITS as readonly string[]).includes(limit)) throw invalid(`budget has no limit "${limit}" (limits: ${DELEGATION_BUDGET_LIMITS.join(', ')})`)
      if (value === undefined) continue
      // Zero is a limit a tree hands on when it has nothing left (no more children, say).
      if (limit === 'cost' ? !(typeof value === 'number' && Number.isFinite(value) && value >= 0 && value <= 1e9) : !(Number.isSafeInteger(value) && value >= 0 && value <= 1e12)) {
        throw invalid(`budget.${limit} must be ${limit === 'cost' ? 'an amount from 0 to 10^9' : 'a whole number from 0 to 10^12'} (got ${String(value)})`)
      }
    }
  }
}
