/**
 * Opening and reopening a remote continuable child's parent-side record: the local
 * session that holds its lineage, its descriptor (with the remote id) and a log of its
 * turns, and the driver that runs its conversation one turn at a time.
 */
import { errorMessage } from '@dsh/base'
import type { Agent } from '@dsh/agent'
import type { Session, SessionStore } from '@dsh/session'
import { SubagentError } from '../errors.js'
import { refuseDisposedParent } from '../admission.js'
import { lineageHeader } from '../lineage.js'
import type { SubagentProvider } from '../types.js'
import { RemoteChildDriver } from './remote-child.js'
import type { ContinuableDescriptor, RemoteChildRecord, RemoteConversation } from './types.js'

export interface RemoteStart {
  childId: string
  parent: Agent
  depth: number
  descriptor: ContinuableDescriptor
  signal: AbortSignal
}

/**
 * Record a freshly opened conversation. The record is announced (persisted) only once
 * nothing can roll it back; any failure before closes the conversation and leaves no file.
 */
export async function recordRemoteChild(
  sessions: SessionStore,
  conversation: RemoteConversation,
  start: RemoteStart,
  onFault: (error: unknown) => void,
): Promise<{ session: Session; descriptor: ContinuableDescriptor; driver: RemoteChildDriver }> {
  const { parent, descriptor, signal } = start
  const recorded: ContinuableDescriptor = { ...descriptor, remote: { remoteId: conversation.remoteId, ...(conversation.resumeData && { resumeData: { ...conversation.resumeData } }) } }
  let session: Session
  try {
    session = sessions.create({
      ...lineageHeader({ parentSession: parent.id, delegationDepth: start.depth, provider: descriptor.provider, label: descriptor.label }),
      id: start.childId,
      origin: 'subagent',
      cwd: parent.session.header.cwd,
      descriptor: recorded as unknown as Record<string, unknown>,
      announce: false,
    })
  } catch (error) {
    await conversation.dispose().catch(() => {
      /* the creation failure is what the caller must hear */
    })
    throw new SubagentError('START_FAILED', `the continuable child could not be recorded: ${errorMessage(error)}`, { cause: error })
  }
  if (signal.aborted || parent.status === 'disposing' || parent.status === 'disposed') {
    await Promise.allSettled([conversation.dispose(), sessions.release(session)])
    if (signal.aborted) throw new SubagentError('ABORTED', 'the delegation was cancelled while the child was being created', { cause: signal.reason })
    refuseDisposedParent(parent)
  }
  sessions.announce(session)
  return { session, descriptor: recorded, driver: new RemoteChildDriver(session, conversation, onFault) }
}

/** Reopen a stored remote child: its provider reopens the conversation (`resume`), then its record is opened. */
export async function reopenRemoteChild(
  sessions: SessionStore,
  resume: NonNullable<SubagentProvider['resumeContinuable']>,
  record: RemoteChildRecord,
  signal: AbortSignal | undefined,
  onFault: (error: unknown) => void,
): Promise<{ session: Session; driver: RemoteChildDriver } | { problem: string }> {
  let conversation: RemoteConversation
  try {
    conversation = await resume(record, signal ?? new AbortController().signal)
  } catch (error) {
    return { problem: `its provider could not reopen conversation ${record.remoteId}: ${errorMessage(error)}` }
  }
  try {
    const session = await sessions.open(record.childId)
    return { session, driver: new RemoteChildDriver(session, conversation, onFault) }
  } catch (error) {
    await conversation.dispose().catch(() => {
      /* the unreadable record is what the caller must hear */
    })
    return { problem: `its record could not be reopened: ${errorMessage(error)}` }
  }
}
