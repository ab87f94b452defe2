import { DshError } from '@dsh/base'

export type SubagentToolErrorCode =
  /** The tool's provider is not registered (a host reports it once start-up is over). */
  | 'NO_PROVIDER'
  /** The tool's config sets `maxDepth`, and its provider cannot enforce a depth limit. */
  | 'DEPTH_UNSUPPORTED'
  /** `backgroundMode: continuable`, and its provider cannot keep a child across turns. */
  | 'CONTINUATION_UNSUPPORTED'
  /** `workspace` or `sandbox` that its provider cannot honour. */
  | 'UNSUPPORTED_CAPABILITY'

/** A subagent tool whose config its provider cannot honour; raised when the tool mounts. */
export class SubagentToolError extends DshError<SubagentToolErrorCode> {}
