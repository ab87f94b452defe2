/**
 * Which side effects a finished call's child had outside a workspace of its own: every
 * side-effecting tool call the approval broker (or a gate) let run, as the child's session
 * and its in-process descendants' sessions record it (`tool/result`'s `permission`), and
 * every approval recorded for a remote child (`approval` events), in a session whose
 * header names no workspace; a remote child at any depth (a spawn child's `dsh acp`
 * child) is followed into the session it keeps in this store, as `remoteSideEffectsOf`
 * does for the call's own. A call with any is not reused silently by a resume: running
 * it again would do it again, and not running it would take its result on trust.
 */
import type { Context } from 'cordis'
import type { Session, SessionEvent, SessionHeader } from '@dsh/session'
import type {} from '@dsh/subagent'

const MOST_DESCENDANTS = 1000

export async function sideEffectsOf(sessions: Context['sessions'], childId: string): Promise<string[]> {
  const effects: string[] = []
  const seen = new Set<string>()
  const queue = [childId]
  while (queue.length > 0 && seen.size < MOST_DESCENDANTS) {
    const id = queue.shift()!
    if (seen.has(id)) continue
    seen.add(id)
    const read = await readSession(sessions, id)
    if (read === undefined) continue
    const outside = read.header.workspace === undefined
    const calls = new Map<string, { name: string; args: unknown }>()
    for (const event of read.events) {
      if (event.type === 'tool/call') calls.set(event.call.id, { name: event.call.name, args: event.call.args })
      else if (event.type === 'tool/result') {
        const child = (event.record as { delegation?: { childId?: unknown; local?: unknown; workspace?: unknown } } | undefined)?.delegation
        if (typeof child?.childId === 'string') {
          if (child.local !== false) queue.push(child.childId)
          // A remote child at any depth, as for the call's own (remoteSideEffectsOf): its approvals are
          // this session's approval events (counted below); the session it keeps in this store, read too.
          else if (child.workspace === undefined) queue.push(...keptSessionOf(child.childId))
        }
        if (outside && event.permission !== undefined && event.permission.decision !== 'reject') effects.push(describe(calls.get(event.result.callId) ?? { name: event.result.name, args: undefined }))
      } else if (event.type === 'approval' && outside && event.permission.decision !== 'reject') {
        effects.push(describe({ name: event.request.tool, args: { command: event.request.subject } }))
      }
    }
  }
  return effects
}

/**
 * A child kept elsewhere: the approvals its provider recorded for it in the parent's
 * session (`approval` events naming it as `child`), and, for a child that keeps a session
 * of this store (a `dsh acp` child: `acp:<its session id>`), what that session records.
 * Nothing for one that worked in a workspace of its own.
 */
export async function remoteSideEffectsOf(sessions: Context['sessions'], parent: Session, runId: string, inWorkspace: boolean): Promise<string[]> {
  if (inWorkspace) return []
  const effects: string[] = []
  for (const event of parent.events()) {
    if (event.type === 'approval' && event.request.child === runId && event.permission.decision !== 'reject') effects.push(describe({ name: event.request.tool, args: { command: event.request.subject } }))
  }
  for (const kept of keptSessionOf(runId)) effects.push(...(await sideEffectsOf(sessions, kept)))
  return effects
}

/** The session a remote child keeps in this store: a `dsh acp` child's run id is `acp:<its session id>`. */
function keptSessionOf(runId: string): string[] {
  const colon = runId.indexOf(':')
  return colon > 0 ? [runId.slice(colon + 1)] : []
}

async function readSession(sessions: Context['sessions'], id: string): Promise<{ header: SessionHeader; events: readonly SessionEvent[] } | undefined> {
  const live: Session | undefined = sessions.get(id)
  if (live !== undefined) return { header: live.header, events: live.events() }
  try {
    return await sessions.readStored(id)
  } catch {
    return undefined
  }
}

function describe(call: { name: string; args: unknown }): string {
  const args = call.args as { command?: unknown; path?: unknown } | undefined
  const subject = typeof args?.command === 'string' ? args.command : typeof args?.path === 'string' ? args.path : ''
  const line = subject === '' ? call.name : `${call.name}: ${subject}`
  return line.length > 160 ? `${line.slice(0, 157)}...` : line
}
