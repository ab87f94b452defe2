/**
 * The one in-process child factory: every child agent this process makes for a delegation
 * (a one-shot spawn or fork run, a continuable child, its cold resume) is created here. It
 * admits the request again (a provider may be called directly), records the lineage in
 * the child's session header, gives the child its model and persona, applies the tool
 * filter in the child's set-up (so a bad filter rolls the child back before anyone sees
 * it) and refuses, with the child disposed again, a delegation that can no longer stand
 * once the child exists.
 *
 * Not an async function: every child of a fan-out passes here, and an async function
 * would cost each a frame and a tick around the agent's creation.
 */
import type { Context } from 'cordis'
import { errorMessage } from '@dsh/base'
import type { Agent, AgentOptions, AgentRegistry, CreateAgentOptions } from '@dsh/agent'
import type { Session } from '@dsh/session'
import type { ToolFilter } from '@dsh/tools'
import { refuseDisposedParent, refuseUnstartable } from './admission.js'
import { SubagentError } from './errors.js'
import { lineageWith } from './lineage.js'
import type { SubagentRequest } from './types.js'

/** What of a request shapes an in-process child (a continuable request has no signal of its own: the caller's is passed in). */
export type InProcessChildRequest = Pick<SubagentRequest, 'parent' | 'signal' | 'label' | 'callId' | 'agentOptions' | 'maxDepth' | 'toolFilter' | 'persona' | 'helper' | 'permissions' | 'approvalDefault' | 'workingDirectory' | 'sandbox'>

export interface InProcessChildOptions {
  /** The provider's registered name, recorded in the child's header. */
  provider: string
  /** Share the parent's completed turns (fork). */
  seed?: { session: Session; length: number }
  /** A reserved session id (a continuable child's, chosen before its provider was asked). */
  id?: string
  /** A continuable child's durable descriptor, recorded in its header. */
  descriptor?: Readonly<Record<string, unknown>>
  /**
   * More child-scoped set-up (a structured-output tool, the continuable set-ups): runs in
   * the child's own context before it is visible and returns the names of the tools it
   * registered, which the child's tool filter never hides.
   */
  setup?: (childCtx: Context, child: Agent) => readonly string[] | void
}

/** Create the child agent of `request`; it rejects with a `SubagentError`, leaving nothing behind. */
export function createInProcessChild(agents: AgentRegistry, request: InProcessChildRequest, options: InProcessChildOptions): Promise<Agent> {
  return createInProcessChildAnd(agents, request, options, theChild)
}

/**
 * `createInProcessChild`, with what the caller makes of the standing child (a provider's
 * published run) made in the same promise step: every child of a fan-out passes here, and
 * a step of its own would cost each a promise, a closure and a tick.
 */
export function createInProcessChildAnd<T>(agents: AgentRegistry, request: InProcessChildRequest, options: InProcessChildOptions, publish: (child: Agent) => T): Promise<T> {
  // A throw becomes a rejection, as from an async function (no closure made for it per child).
  try {
    // Recorded in the child's header, so its own delegations stay within the bound.
    const maxDepth = refuseUnstartable(request, 'the child')
    const { parent, signal } = request
    // The lineage object is the header's fields as they are (no copy of it per child).
    const meta: NonNullable<CreateAgentOptions['meta']> = lineageWith(request, options.provider, maxDepth, request.approvalDefault)
    meta.origin = 'subagent'
    // A workspace of its own (the service made it before asking the provider), else the parent's directory.
    const working = request.workingDirectory
    meta.cwd = working?.cwd ?? parent.session.header.cwd
    if (working?.workspace !== undefined) meta.workspace = working.workspace
    // Confined commands: its own bash tool reads this from its header. A sandboxed parent's
    // children are confined too (a child can narrow its parent's sandbox, never leave it).
    const inherited = parent.session.header.sandbox
    const asked = request.sandbox !== undefined && request.sandbox !== false ? { network: request.sandbox !== 'no-network' } : undefined
    if (inherited !== undefined || asked !== undefined) meta.sandbox = { network: (inherited?.network ?? true) && (asked?.network ?? true) }
    if (options.id !== undefined) meta.id = options.id
    if (options.descriptor !== undefined) meta.descriptor = options.descriptor
    if (request.helper !== undefined) meta.helper = request.helper
    const createOptions: CreateAgentOptions = { seed: options.seed, parent, signal, meta, agentOptions: childAgentOptions(request, parent) }
    // Only a child that needs scoped registrations pays for its own framework context.
    const setup = childSetup(request.toolFilter, options.setup)
    if (setup !== undefined) createOptions.setup = setup
    return agents.create(createOptions).then(
      (child) => standing(child, request, publish),
      (error: unknown) => {
        throw creationFailure(error, signal)
      },
    )
  } catch (error) {
    return Promise.reject(error)
  }
}

/**
 * Reopen the in-process child stored as `sessionId` (a continuable child's cold resume),
 * with its model, persona, filter and set-up as its descriptor says.
 */
export function resumeInProcessChild(
  agents: AgentRegistry,
  sessionId: string,
  request: Pick<InProcessChildRequest, 'parent' | 'agentOptions' | 'persona' | 'toolFilter'> & { signal?: AbortSignal },
  setupMore?: InProcessChildOptions['setup'],
): Promise<Agent> {
  const createOptions: CreateAgentOptions = { sessionId, parent: request.parent, agentOptions: childAgentOptions(request, undefined) }
  if (request.signal !== undefined) createOptions.signal = request.signal
  const setup = childSetup(request.toolFilter, setupMore)
  if (setup !== undefined) createOptions.setup = setup
  return agents.create(createOptions)
}

/**
 * The child's model (the request's, else its parent's) and persona. A persona is given to
 * one child: that child's own children start from the deployment persona again unless
 * their delegation names one. Optional parts are set one by one: an object literal
 * spreading conditional parts takes V8's generic copy, which a fan-out pays per child.
 */
function childAgentOptions(request: Pick<InProcessChildRequest, 'agentOptions' | 'persona'>, parent: Agent | undefined): AgentOptions {
  const options: AgentOptions = {}
  const model = request.agentOptions?.model ?? parent?.options.model
  if (model !== undefined) options.model = model
  if (request.persona !== undefined) options.persona = request.persona
  return options
}

/** The child's set-up: the extra registrations, then the tool filter (which keeps what they registered). */
function childSetup(filter: ToolFilter | undefined, more: InProcessChildOptions['setup']): CreateAgentOptions['setup'] {
  if (filter === undefined && more === undefined) return undefined
  return (childCtx, child) => {
    const kept = more?.(childCtx, child) ?? []
    if (filter === undefined) return
    const allow = filter.allow && kept.length > 0 ? [...filter.allow, ...kept] : filter.allow
    childCtx.tools.restrict(child.id, allow === undefined ? filter : { ...filter, allow })
  }
}

/** What `publish` makes of the created child; or, when the delegation can no longer stand, the child disposed and the refusal. */
function standing<T>(child: Agent, request: InProcessChildRequest, publish: (child: Agent) => T): T | Promise<never> {
  const { parent, signal } = request
  // The parent began disposing while the child was created: the child would outlive it.
  try {
    refuseDisposedParent(parent)
  } catch (error) {
    return disposedThenRefused(child, error)
  }
  // An abort that landed while create() resolved has no listener to hear it yet.
  if (signal.aborted) return disposedThenRefused(child, cancelledWhileCreated(signal.reason))
  return publish(child)
}

function theChild(child: Agent): Agent {
  return child
}

async function disposedThenRefused(child: Agent, refusal: unknown): Promise<never> {
  await child.dispose()
  throw refusal
}

function cancelledWhileCreated(cause: unknown): SubagentError {
  return new SubagentError('ABORTED', 'the delegation was cancelled while the child was being created', { cause })
}

function creationFailure(error: unknown, signal: AbortSignal): SubagentError {
  if (error instanceof SubagentError) return error
  if (signal.aborted) return cancelledWhileCreated(error)
  return new SubagentError('START_FAILED', `the child could not be started: ${errorMessage(error)}`, { cause: error })
}
