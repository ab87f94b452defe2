/**
 * `session/load`: reopen a stored dsh session over ACP. The session is read back from the
 * runtime's session store (the same files `dsh run --resume` reads), checked against the
 * request, made live as an agent, and its whole conversation is streamed to the client as
 * `session/update`s before the answer, as ACP asks. From then on it takes prompts like a
 * session made by `session/new`, with its whole history in the model's context.
 *
 * Checks happen on the stored copy first, before anything is opened: a refused load takes
 * no lock and changes no file.
 */
import { resolve } from 'node:path'
import { RequestError, type LoadSessionRequest } from '@agentclientprotocol/sdk'
import type { Context } from 'cordis'
import { DshError, errorMessage } from '@dsh/base'
import type { Agent } from '@dsh/agent'
import type { SessionHeader } from '@dsh/session'
import type { ReceivedLineage } from '@dsh/subagent'

export interface LoadChecks {
  /** The client's lineage for the session (`_meta.dsh`), already validated. */
  lineage: ReceivedLineage
  /** The server's depth bound: a stored session deeper than it is not reopened either. */
  maxDepth: number
}

/** Read the stored session `id` and refuse a load that does not fit it. Returns its header. */
export async function checkLoadable(ctx: Context, params: LoadSessionRequest, checks: LoadChecks): Promise<SessionHeader> {
  const { sessionId } = params
  let stored
  try {
    stored = await ctx.sessions.readStored(sessionId)
  } catch (error) {
    throw loadFailure(sessionId, error)
  }
  if (!stored) throw notFound(sessionId, ctx.sessions.locate(sessionId))
  const { header } = stored
  if (resolve(params.cwd) !== resolve(header.cwd)) {
    throw RequestError.invalidParams({ sessionId, cwd: params.cwd, sessionCwd: header.cwd }, `session ${sessionId} belongs to ${header.cwd}, not ${params.cwd}; load it with cwd ${header.cwd}`)
  }
  const { parentSession } = checks.lineage
  // A parent reopening its child names itself: a session of another parent is not its to continue.
  if (parentSession !== undefined && header.parentSession !== parentSession) {
    throw RequestError.invalidParams(
      { sessionId, parentSession, sessionParent: header.parentSession ?? null },
      `session ${sessionId} is not a child of ${parentSession} (${header.parentSession ? `its parent is ${header.parentSession}` : 'it has no parent'}); only its own parent may reopen it`,
    )
  }
  const depth = header.delegationDepth ?? 0
  if (depth > checks.maxDepth) {
    throw RequestError.invalidRequest({ delegationDepth: depth, maxDepth: checks.maxDepth }, `session ${sessionId} is at delegation depth ${depth}, above this server's maxDepth ${checks.maxDepth}; raise --max-depth to reopen it`)
  }
  return header
}

/**
 * Make the checked session live: its agent, or the error that says why not. A budget its
 * header holds (handed by a parent that runs elsewhere) bounds it again from now, as
 * `openDelegation` bounds a new one: reopening (`session/load`, un-parking) must not shed it.
 */
export async function openStored(ctx: Context, sessionId: string): Promise<Agent> {
  let agent: Agent
  try {
    agent = await ctx.agents.create({ sessionId })
  } catch (error) {
    throw loadFailure(sessionId, error)
  }
  try {
    await ctx.get('subagents')?.boundByLineage(agent)
  } catch (error) {
    // Unbounded, it is not served: let go of it (and its lock) before saying why.
    await agent.dispose()
    throw loadFailure(sessionId, error)
  }
  return agent
}

/**
 * A store or registry failure as the JSON-RPC error a client can act on. Codes come from
 * several families (the store, its storage backend, the agent registry), so they are
 * matched by value; anything else is the server's own trouble (`-32603`) with its message.
 */
export function loadFailure(sessionId: string, error: unknown): RequestError {
  if (error instanceof RequestError) return error
  const code = error instanceof DshError ? (error.code as string) : undefined
  const message = errorMessage(error)
  switch (code) {
    case 'NOT_FOUND':
      return notFound(sessionId, undefined, message)
    case 'IN_USE':
      // Another process (another `dsh acp`, a `dsh run --resume`) runs it: its lock says who.
      return RequestError.invalidRequest({ sessionId, code }, `cannot load session ${sessionId}: ${message}`)
    case 'SESSION_IN_USE':
      return RequestError.invalidRequest({ sessionId, code }, `cannot load session ${sessionId}: it is already open in this dsh process`)
    case 'INVALID_ID':
      return RequestError.invalidParams({ sessionId, code }, `cannot load session ${JSON.stringify(sessionId)}: ${message}`)
    default:
      return RequestError.internalError({ sessionId, code: code ?? null }, `cannot load session ${sessionId}: ${message}`)
  }
}

function notFound(sessionId: string, where: string | undefined, detail?: string): RequestError {
  const message = detail ?? `no stored dsh session ${sessionId}${where ? ` (looked for ${where})` : ''}`
  return new RequestError(-32002, `Resource not found: ${message}; check the id, and that this dsh acp uses the same session directory (--session-dir, DSH_HOME)`, { sessionId })
}
