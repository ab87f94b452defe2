/**
 * The one base of every dsh error. A family (`SubagentError`, `TaskError`, …) is a
 * subclass with a closed union of codes; `name` comes from the subclass, so no family
 * re-declares it, and `code` is what callers and tests branch on (messages may change).
 *
 * The name is set explicitly by each family's `static readonly errorName`-free
 * constructor chain: `new.target.name` survives bundling only with `keepNames`, so the
 * bundle must keep class names (see the CLI's build).
 */
export abstract class DshError<Code extends string = string> extends Error {
  readonly code: Code
  constructor(code: Code, message: string, options?: { cause?: unknown }) {
    super(message, options)
    this.code = code
    this.name = new.target.name
  }
}

/** The message of anything thrown: an Error's message, otherwise its string form. */
export function errorMessage(error: unknown): string {
  if (error instanceof Error) return error.message
  if (typeof error === 'string') return error
  try {
    return String(error)
  } catch {
    // An object whose toString throws (or a null-prototype object) still gets a name.
    return Object.prototype.toString.call(error)
  }
}

/** An abort as any of our dependencies spell it (DOM, Node, the OpenAI SDK). */
export function isAbortError(error: unknown): boolean {
  return error instanceof Error && (error.name === 'AbortError' || error.name === 'APIUserAbortError')
}
