import { DshError } from '@dsh/base'

export type ToolErrorCode =
  /** A tool with that name is already visible where it was registered. */
  | 'DUPLICATE_TOOL'
  /** A malformed tool definition (name, schema, execute). */
  | 'INVALID_TOOL'
  /** A filter or look-up names a tool that is not registered. */
  | 'UNKNOWN_TOOL'
  /** A tool filter that says neither what to allow nor what to deny. */
  | 'INVALID_FILTER'

/** Every failure of the tool registry. */
export class ToolError extends DshError<ToolErrorCode> {}
