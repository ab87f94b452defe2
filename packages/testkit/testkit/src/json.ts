/** Reading JSON that arrived over the wire, where anything may turn up. */

/** `undefined` when `text` is not JSON, so a caller can tell "absent" from any parsed value. */
export function parseJson(text: string): unknown {
  try {
    return JSON.parse(text)
  } catch {
    // Not JSON (an empty GET body, or a verbatim scripted tool input): the caller decides what absent means.
    return undefined
  }
}

export { isRecord } from '@dsh/base'
