/** The end of an exhaustive switch over a closed union: a new member fails to compile here. */
export function assertNever(value: never, what = 'value'): never {
  throw new Error(`unexpected ${what}: ${JSON.stringify(value)}`)
}

/** A plain JSON-style object (not null, not an array): the first check on any parsed input. */
export function isRecord(value: unknown): value is Record<string, unknown> {
  return typeof value === 'object' && value !== null && !Array.isArray(value)
}
