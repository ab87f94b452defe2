/**
 * The first place two JSON values differ, as a path (`messages[2].content[0].text`) and
 * both values shortened around the difference, for divergence messages.
 */
import { isRecord } from '@dsh/base'

export interface Difference {
  path: string
  recorded: string
  live: string
}

export function firstDifference(recorded: unknown, live: unknown, path = ''): Difference | undefined {
  if (Object.is(recorded, live)) return undefined
  if (Array.isArray(recorded) && Array.isArray(live)) {
    const shared = Math.min(recorded.length, live.length)
    for (let index = 0; index < shared; index++) {
      const difference = firstDifference(recorded[index], live[index], `${path}[${index}]`)
      if (difference) return difference
    }
    if (recorded.length === live.length) return undefined
    return { path: `${path}.length`, recorded: String(recorded.length), live: String(live.length) }
  }
  if (isRecord(recorded) && isRecord(live) && !Array.isArray(recorded) && !Array.isArray(live)) {
    const keys = [...new Set([...Object.keys(recorded), ...Object.keys(live)])]
    for (const key of keys) {
      const difference = firstDifference(recorded[key], live[key], path ? `${path}.${key}` : key)
      if (difference) return difference
    }
    return undefined
  }
  if (typeof recorded === 'string' && typeof live === 'string') {
    const [a, b] = shortenPair(recorded, live)
    return { path, recorded: a, live: b }
  }
  return { path, recorded: shorten(describe(recorded)), live: shorten(describe(live)) }
}

const WIDTH = 60
const BEFORE = 20

function describe(value: unknown): string {
  return value === undefined ? '(absent)' : JSON.stringify(value)
}

function shorten(text: string): string {
  return text.length <= WIDTH ? text : `${text.slice(0, WIDTH - 1)}…`
}

/** Both strings from a little before their first differing character, quoted. */
function shortenPair(a: string, b: string): [string, string] {
  let at = 0
  while (at < a.length && at < b.length && a[at] === b[at]) at++
  const start = Math.max(0, at - BEFORE)
  const cut = (text: string) => {
    const piece = text.slice(start, start + WIDTH)
    return `${start > 0 ? '…' : ''}${JSON.stringify(piece).slice(1, -1)}${start + WIDTH < text.length ? '…' : ''}`
  }
  return [`"${cut(a)}"`, `"${cut(b)}"`]
}
