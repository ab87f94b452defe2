import { compactArgs as compactForDisplay } from '@dsh/subagent'

/** Longest argument text shown in the activity column, in characters. */
const MAX_ARGS = 60

/** A tool call's arguments as the activity column shows them (see `compactArgs` in `@dsh/subagent`). */
export function compactArgs(args: string): string {
  return compactForDisplay(args, MAX_ARGS)
}
