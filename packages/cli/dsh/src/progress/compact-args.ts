/** Longest argument text shown in the activity column, in characters. */
const MAX_ARGS = 60

/**
 * A tool call's argument summary as a person reads it at a glance: the value alone when
 * the call has a single text argument (`{"command":"ls -la"}` → `ls -la`), else the
 * summary as given; one line, bounded. (`dsh acp` shows children to an editor the same
 * way; the terminal keeps its own copy so `dsh run` does not load the ACP server.)
 */
export function compactArgs(args: string): string {
  let shown = args
  try {
    const parsed: unknown = JSON.parse(args)
    if (parsed !== null && typeof parsed === 'object' && !Array.isArray(parsed)) {
      const values = Object.values(parsed)
      if (values.length === 1 && typeof values[0] === 'string') shown = values[0]
    }
  } catch {
    // A summary cut short (or plain text) is not JSON: it is shown as it is.
  }
  shown = shown.replace(/\s+/g, ' ').trim()
  return shown.length > MAX_ARGS ? `${shown.slice(0, MAX_ARGS - 1)}…` : shown
}
