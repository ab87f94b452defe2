/**
 * A one-shot remote run: a conversation of one turn. Admission first, then one start-up
 * window from the launch until the turn is accepted (a failure anywhere in it rejects the
 * start, with the child closed); the run is published at acceptance, its result is the
 * turn's, and disposing it cancels what is left and closes the child.
 */
import { refuseDisposedParent, refuseUnstartable } from '../admission.js'
import type { SubagentRequest, SubagentRun } from '../types.js'
import { ConversationCore, type RemoteChild, type RemoteTransport } from './conversation.js'
import { closedAfterFailure, openInWindow, StartupWindow } from './launch.js'

/** The run handle of every remote provider. */
export interface RemoteSubagentRun extends SubagentRun {
  readonly local: false
  /** The remote side's own id for the child (an ACP session id, a Codex thread id, a Claude Code session id, an A2A task id). */
  readonly remoteId: string
  /** The child process's pid (also its process group id), when the transport runs one here. */
  readonly pid: number | undefined
}

/** The one child-id format of remote runs: `<provider>:<remote id>`. */
export function remoteChildId(provider: string, remoteId: string): string {
  return `${provider}:${remoteId}`
}

/** Start a one-shot remote run over `transport`; nothing exists before admission passes. */
export async function startRemoteRun<Child extends RemoteChild>(request: SubagentRequest, transport: RemoteTransport<Child>): Promise<RemoteSubagentRun> {
  refuseUnstartable(request, transport.childName)
  const { signal } = request
  const startedAt = Date.now()
  const tighter = transport.timeoutIncludesStartup && transport.timeoutMs !== undefined ? { ms: transport.timeoutMs, key: 'timeoutMs' } : undefined
  const window = new StartupWindow(transport, signal, transport.initialStage, tighter)
  let child: Child
  try {
    child = await openInWindow(window, (control) => transport.connect(control), transport)
  } catch (error) {
    window.close(false)
    throw error
  }
  const conversation = new ConversationCore(transport, child)
  const turn = conversation.first(request.prompt, request.progress, window, startedAt)
  let remoteId: string | undefined
  try {
    remoteId = (await window.race(turn.acceptance)) ?? child.remoteId
    // The parent began disposing while the child started: the child would outlive it.
    refuseDisposedParent(request.parent)
  } catch (error) {
    window.close(false)
    turn.abandonStart('error', 'the run did not start')
    throw await closedAfterFailure(child, error, window, transport)
  }
  turn.begin()
  const onAbort = () => turn.cancel(signal.reason)
  signal.addEventListener('abort', onAbort, { once: true })
  void turn.done.then(() => signal.removeEventListener('abort', onAbort))
  // Aborted between the last start-up step and here: the listener above can no longer fire.
  if (signal.aborted) turn.cancel(signal.reason)
  let disposal: Promise<void> | undefined
  const id = remoteId ?? 'unnamed'
  const storedAt = transport.storedAt?.(child)
  return {
    id: remoteChildId(transport.provider, id),
    remoteId: id,
    pid: child.process?.pid,
    local: false,
    ...(storedAt !== undefined && { storedAt }),
    result: turn.done,
    cancel: (reason?: unknown) => turn.cancel(reason),
    // Cancel what is left, give the child its grace period to confirm, then close it.
    dispose: () =>
      (disposal ??= (async () => {
        turn.cancel('the run was disposed before it finished')
        await turn.done
        await conversation.dispose()
      })()),
  }
}
