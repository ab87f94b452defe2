/**
 * Text measured as a terminal shows it: in columns, not UTF-16 units. A CJK character or
 * most emoji take two columns, a combining mark none, and a flag is one grapheme of two
 * code points. Every display string of the tree is cut by this (the live tree's lines, the
 * activity lines an editor shows, the summaries a progress update carries), so a line never
 * wraps, a redraw moves the cursor back over exactly the lines it drew, and no cut splits a
 * character in two.
 */
import stringWidth from 'string-width'

const graphemes = new Intl.Segmenter(undefined, { granularity: 'grapheme' })

/**
 * Printable ASCII takes one column a character: most text is only that, and it is measured
 * by its length, without the Unicode tables (every progress update passes through here).
 */
const PRINTABLE_ASCII = /^[\x20-\x7e]*$/

/** How many terminal columns `text` takes (escape sequences take none). */
export function columnWidth(text: string): number {
  return PRINTABLE_ASCII.test(text) ? text.length : stringWidth(text)
}

/** `text` cut to at most `width` columns, with `…` where it was cut. */
export function truncateColumns(text: string, width: number): string {
  if (PRINTABLE_ASCII.test(text)) return text.length <= width ? text : `${text.slice(0, Math.max(0, width - 1))}…`
  if (stringWidth(text) <= width) return text
  let out = ''
  let used = 0
  for (const { segment } of graphemes.segment(text)) {
    const next = stringWidth(segment)
    if (used + next > width - 1) break
    out += segment
    used += next
  }
  return `${out}…`
}

/** `text` padded with spaces to `width` columns (never cut). */
export function padColumns(text: string, width: number): string {
  return text + ' '.repeat(Math.max(0, width - columnWidth(text)))
}
