/**
 * The one base of every dsh error. A family (`SubagentError`, `TaskError`, …) is a
 * subclass with a closed union of codes; `name` comes from the subclass, so no family
 * re-declares it, and `code` is what callers and tests branch on (messages may change).
 *
 * The name is read from `new.target`, the class actually constructed. A bundler that
 * renames classes would change it, so a bundled build must keep class names.
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

/**
 * `text` safe to print on a terminal: control characters (escape sequences, bell,
 * carriage return, …) are shown as `\xHH` instead of acting, and the bidirectional
 * formatting characters (U+202E and its kin, which reorder what follows them on screen) as
 * `\uHHHH`. Newlines and tabs stay. Anything that echoes bytes from a file or a peer into a
 * message passes through it.
 */
export function printable(text: string): string {
  return text
    // eslint-disable-next-line no-control-regex -- matching control characters is the point
    .replace(/[\u0000-\u0008\u000b-\u001f\u007f-\u009f]/g, (char) => `\\x${char.charCodeAt(0).toString(16).padStart(2, '0')}`)
    .replace(/[\u061c\u200e\u200f\u202a-\u202e\u2066-\u2069]/g, (char) => `\\u${char.charCodeAt(0).toString(16)}`)
}

/** An abort as any of our dependencies spell it (DOM, Node, the OpenAI SDK). */
export function isAbortError(error: unknown): boolean {
  return error instanceof Error && (error.name === 'AbortError' || error.name === 'APIUserAbortError')
}
