/**
 * The top-level keys and `id` of a JSON object whose text may be cut off anywhere: all an
 * oversized frame keeps is its first few kilobytes, and its `id` decides whether it can
 * be answered. Values other than `id` are skipped without being built.
 */
export interface TopLevelFields {
  keys: Set<string>
  /** A string or number `id` (or `null`), when one was read whole. */
  id?: string | number | null
}

export function readTopLevelFields(text: string): TopLevelFields {
  const fields: TopLevelFields = { keys: new Set() }
  let at = skipSpace(text, 0)
  if (text[at] !== '{') return fields
  at++
  for (;;) {
    at = skipSpace(text, at)
    if (text[at] !== '"') return fields
    const keyEnd = stringEnd(text, at)
    if (keyEnd === -1) return fields
    let key: string
    try {
      key = JSON.parse(text.slice(at, keyEnd)) as string
    } catch {
      return fields
    }
    at = skipSpace(text, keyEnd)
    if (text[at] !== ':') return fields
    at = skipSpace(text, at + 1)
    const valueEnd = skipValue(text, at)
    if (valueEnd === -1) return fields
    fields.keys.add(key)
    if (key === 'id') {
      const id = idOf(text.slice(at, valueEnd))
      if (id !== undefined) fields.id = id
    }
    at = skipSpace(text, valueEnd)
    if (text[at] !== ',') return fields
    at++
  }
}

function idOf(raw: string): string | number | null | undefined {
  try {
    const value: unknown = JSON.parse(raw)
    return typeof value === 'string' || typeof value === 'number' || value === null ? value : undefined
  } catch {
    return undefined
  }
}

function skipSpace(text: string, at: number): number {
  while (at < text.length && ' \t\r\n'.includes(text[at])) at++
  return at
}

/** The index just past the string starting at `at` (a `"`), or -1 when it is cut off. */
function stringEnd(text: string, at: number): number {
  for (let i = at + 1; i < text.length; i++) {
    if (text[i] === '\\') i++
    else if (text[i] === '"') return i + 1
  }
  return -1
}

/** The index just past the value starting at `at`, or -1 when it is cut off. */
function skipValue(text: string, at: number): number {
  const first = text[at]
  if (first === '"') return stringEnd(text, at)
  if (first === '{' || first === '[') {
    let depth = 0
    for (let i = at; i < text.length; i++) {
      const char = text[i]
      if (char === '"') {
        const end = stringEnd(text, i)
        if (end === -1) return -1
        i = end - 1
      } else if (char === '{' || char === '[') depth++
      else if (char === '}' || char === ']') {
        depth--
        if (depth === 0) return i + 1
      }
    }
    return -1
  }
  // A number, true, false or null: it runs to the next delimiter, which must be present.
  let i = at
  while (i < text.length && !',}] \t\r\n'.includes(text[i])) i++
  return i < text.length && i > at ? i : -1
}
