/**
 * The meta-schema's `format: "regex"` (a `pattern`, a key of `patternProperties`): the text
 * must compile as ajv compiles a pattern when it builds a validator (a Unicode regular
 * expression), so a pattern that would fail there fails at registration instead.
 */
export function isRegExpSource(text: string): boolean {
  try {
    new RegExp(text, 'u')
    return true
  } catch {
    // A SyntaxError is the answer to the question: not a pattern ajv can compile.
    return false
  }
}
