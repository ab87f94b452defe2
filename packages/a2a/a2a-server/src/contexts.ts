/**
 * A2A contexts as dsh sessions. A context id is the id of the dsh session that holds the
 * context's conversation (origin `a2a`): the first task of a context creates the session,
 * each later task of it is another turn in the same session, reopened from storage (so a
 * context outlives the worker's process too).
 *
 * - A message without a `contextId` (and without a `taskId`) opens a new context: this
 *   server names it with a fresh session id.
 * - A message naming a context this server holds continues it.
 * - A message naming a context this server does not hold opens it under that name (the
 *   A2A specification lets an agent accept a client's context id, as the SDK does and the
 *   conformance kit checks), when the name can be a session id and names no other session
 *   here (else `RequestMalformedError`: the specification's alternative, refusing, with no
 *   other context id made up).
 * - A dsh parent continuing a child says the context must exist already
 *   (`metadata.dsh.existingContext: true`): then an unknown context is refused with
 *   `RequestMalformedError`, so a lost context (its session deleted, another worker asked)
 *   is reported, never silently replaced by an empty conversation. The card announces all
 *   this as the extension `CONTEXTS_EXTENSION`.
 *
 * One task runs in a context at a time: a message for a context whose task is still
 * waiting or working is refused (`UnsupportedOperationError`), before anything is made.
 * Continuing needs session storage (`@dsh/session-jsonl`, which `dsh a2a serve` loads);
 * without it nothing is remembered: every task is a new conversation, and a message that
 * says its context must exist is refused.
 */
import type { Message } from '@a2a-js/sdk'
import { RequestMalformedError, UnsupportedOperationError } from '@a2a-js/sdk/errors'
import type { Context } from 'cordis'
import { DshError, errorMessage, isRecord } from '@dsh/base'
import { newSessionId, type SessionHeader } from '@dsh/session'

/** The card extension by which this server says contexts are stored conversations a client may name, and that it honours `metadata.dsh.existingContext`. */
export const CONTEXTS_EXTENSION = 'urn:dsh:a2a:contexts:v1'

/** Longest context id a client may name (a session id: a file name, with storage). */
const MAX_CONTEXT_ID_CHARS = 128

/** The session origin of A2A tasks: only such sessions are contexts. */
export const A2A_ORIGIN = 'a2a'

/** What a task's context is: a new session to create, or a stored one to continue. */
export type ContextClaim = { readonly kind: 'new'; readonly contextId: string } | { readonly kind: 'continue'; readonly contextId: string; readonly header: SessionHeader }

/** A context held for one task, from the request's admission until the task's session is released. */
export interface ContextHold {
  readonly claim: ContextClaim
  /** Let the context take its next task. Idempotent. */
  release(): void
}

interface Held {
  /** Undefined while the claim is still being checked. */
  claim: ContextClaim | undefined
  /** Set once the task's executor took the hold over (it releases it when the task ends). */
  taken: boolean
  /** The task holding it, once known. */
  taskId: string | undefined
}

export class Contexts {
  private readonly held = new Map<string, Held>()

  constructor(private readonly ctx: Context) {}

  /** Whether contexts can be continued here: sessions are stored. */
  get continuable(): boolean {
    return this.ctx.sessions.storageName !== undefined
  }

  /**
   * Admit the context of a message that starts a task (it has no `taskId`), and hold it
   * for that task. A message without a context is given a new one (its `contextId` is set
   * here). Throws the A2A error the client receives; nothing is held then.
   */
  async admit(message: Message): Promise<ContextHold> {
    if (!message.contextId) {
      const contextId = newSessionId()
      message.contextId = contextId
      return this.hold(contextId, { kind: 'new', contextId })
    }
    const contextId = message.contextId
    // Held synchronously, before the first await: two messages for one context cannot both pass.
    const entry = this.reserve(contextId)
    try {
      const claim = await this.check(contextId, message)
      entry.claim = claim
      return this.handle(contextId, entry)
    } catch (error) {
      this.held.delete(contextId)
      throw error
    }
  }

  /** The hold `admit` made for `contextId`, taken over by the task that runs in it (`undefined` when none was made). */
  take(contextId: string, taskId: string): ContextHold | undefined {
    const entry = this.held.get(contextId)
    if (!entry || entry.claim === undefined || entry.taken) return undefined
    entry.taken = true
    entry.taskId = taskId
    return this.handle(contextId, entry)
  }

  /** Release a hold its task never took over (the request failed before the task began). */
  releaseUntaken(hold: ContextHold): void {
    const entry = this.held.get(hold.claim.contextId)
    if (entry && !entry.taken && entry.claim === hold.claim) this.held.delete(hold.claim.contextId)
  }

  private hold(contextId: string, claim: ContextClaim): ContextHold {
    const entry = this.reserve(contextId)
    entry.claim = claim
    return this.handle(contextId, entry)
  }

  private reserve(contextId: string): Held {
    const busy = this.held.get(contextId)
    if (busy) {
      const task = busy.taskId === undefined ? 'a task' : `task ${busy.taskId}`
      throw new UnsupportedOperationError(`context ${contextId} has ${task} still running; wait until it ends (or cancel it), then send the next message`)
    }
    const entry: Held = { claim: undefined, taken: false, taskId: undefined }
    this.held.set(contextId, entry)
    return entry
  }

  private handle(contextId: string, entry: Held): ContextHold {
    return {
      claim: entry.claim!,
      release: () => {
        if (this.held.get(contextId) === entry) this.held.delete(contextId)
      },
    }
  }

  /** What the context a message names is: one to continue, or a new one under the client's name. */
  private async check(contextId: string, message: Message): Promise<ContextClaim> {
    const mustExist = isRecord(message.metadata) && isRecord(message.metadata.dsh) && message.metadata.dsh.existingContext === true
    if (contextId.length > MAX_CONTEXT_ID_CHARS || !/^[\x21-\x7e]+$/.test(contextId)) {
      throw new RequestMalformedError(`contextId ${JSON.stringify(contextId.slice(0, 140))} cannot name a context here: use at most ${MAX_CONTEXT_ID_CHARS} printable characters without spaces`)
    }
    if (!this.continuable) {
      if (mustExist) throw new UnsupportedOperationError(`this worker stores no sessions, so it holds no context ${contextId} to continue; send the message without a contextId`)
      return { kind: 'new', contextId }
    }
    if (this.ctx.sessions.get(contextId)) throw notOurs(contextId)
    let header: SessionHeader | undefined
    try {
      header = (await this.ctx.sessions.readStored(contextId))?.header
    } catch (error) {
      // An id that cannot name a session (the storage refuses it) is a client mistake; anything else is ours.
      if (error instanceof DshError && (error.code as string) === 'INVALID_ID') throw new RequestMalformedError(`contextId ${JSON.stringify(contextId).slice(0, 140)} cannot name a context here: ${errorMessage(error)}`)
      throw new UnsupportedOperationError(`context ${contextId} cannot be read: ${errorMessage(error)}`)
    }
    if (header === undefined) {
      if (mustExist) throw unknown(contextId)
      return { kind: 'new', contextId }
    }
    // Only the sessions of A2A tasks are contexts: another session on this machine is not the client's to continue.
    if (header.origin !== A2A_ORIGIN) throw notOurs(contextId)
    const parentSession = parentSessionOf(message.metadata)
    // A dsh parent continuing its child names itself: a context of another parent is not its to continue.
    if (parentSession !== undefined && header.parentSession !== undefined && parentSession !== header.parentSession) {
      throw new RequestMalformedError(`context ${contextId} belongs to another delegating parent (${header.parentSession}), not ${parentSession}; only its own parent may continue it`)
    }
    return { kind: 'continue', contextId, header }
  }
}

function unknown(contextId: string): RequestMalformedError {
  return new RequestMalformedError(
    `this worker has no context ${contextId} (it names no conversation of this worker's sessions: another worker's, or one whose session is gone); send the message without metadata.dsh.existingContext, or without a contextId, to start a new one`,
  )
}

/** A name taken by a session that is not an A2A context: it cannot be one. */
function notOurs(contextId: string): RequestMalformedError {
  return new RequestMalformedError(`context id ${contextId} is taken here by something that is not an A2A conversation; name another, or send the message without a contextId`)
}

/** The delegating parent a dsh client names in `metadata.dsh.parentSession`, if any (checked again by the lineage decoder). */
function parentSessionOf(metadata: unknown): string | undefined {
  const dsh = isRecord(metadata) ? metadata.dsh : undefined
  const parent = isRecord(dsh) ? dsh.parentSession : undefined
  return typeof parent === 'string' ? parent : undefined
}
