import { DshError } from '@dsh/base'

export type AgentErrorCode =
  /** `ctx.agents.create` was asked to resume a session that already has a live agent. */
  | 'SESSION_IN_USE'
  /** `create`'s signal aborted before the agent existed; nothing was kept. */
  | 'ABORTED'
  /** Contradictory create options (resume and seed at once). */
  | 'INVALID_OPTIONS'
  /** The agent is disposing or disposed: it takes no new turns or input. */
  | 'DISPOSED'

/** Every failure of `ctx.agents` and of an agent handle. */
export class AgentError extends DshError<AgentErrorCode> {}
