/**
 * Text measured as a terminal shows it: in columns, not UTF-16 units. A CJK character or
 * most emoji take two columns, a combining mark none, and a flag is one grapheme of two
 * code points. Every display string of the tree is cut by this (the live tree's lines, the
 * activity lines an editor shows, the summaries a progress update carries), so a line never
 * wraps, a redraw moves the cursor back over exactly the lines it drew, and no cut splits a
 * character in two.
 *
 * Nothing here is built when the module loads: the first `Intl.Segmenter` of a process
 * loads ICU's break rules (12 ms on a quiet machine, several times that under load), the
 * emoji expression builds its sequence set, and
 * every dsh start imports this module although most text it measures is printable ASCII.
 */
import { eastAsianWidth } from 'get-east-asian-width'

let graphemeSegmenter: Intl.Segmenter | undefined

/** The text's graphemes (user-perceived characters), the segmenter made on first use. */
function graphemes(text: string): Iterable<Intl.SegmentData> {
  graphemeSegmenter ??= new Intl.Segmenter(undefined, { granularity: 'grapheme' })
  return graphemeSegmenter.segment(text)
}

/**
 * Printable ASCII takes one column a character: most text is only that, and it is measured
 * by its length, without the Unicode tables (every progress update passes through here).
 */
const PRINTABLE_ASCII = /^[\x20-\x7e]*$/

/** Terminal escape sequences (CSI, as colours are written, and OSC, as links are): no column. */
const ESCAPE_SEQUENCES = /\x1b\[[0-?]*[ -/]*[@-~]|\x1b\][^\x07\x1b]*(?:\x07|\x1b\\)/g

/** A grapheme a terminal draws in no column: a control, a mark alone, a zero-width format character. */
const ZERO_WIDTH = /^[\p{Cc}\p{Mn}\p{Me}\p{Default_Ignorable_Code_Point}]+$/u

/**
 * A grapheme drawn as an emoji picture, two columns (flags, sequences, presentation forms).
 * Compiled on first use: V8 builds the emoji sequence set when the expression is made
 * (about 27 ms), and `v` (sequence properties) is newer than the compile target.
 */
let emojiPicture: RegExp | undefined
function isEmojiPicture(grapheme: string): boolean {
  emojiPicture ??= new RegExp('^(?:\\p{RGI_Emoji}|\\p{Extended_Pictographic}\\uFE0F)$', 'v')
  return emojiPicture.test(grapheme)
}

/** Columns of one grapheme: its first code point's East Asian width, unless it draws none or an emoji. */
function graphemeWidth(grapheme: string): number {
  if (ZERO_WIDTH.test(grapheme)) return 0
  if (isEmojiPicture(grapheme)) return 2
  return eastAsianWidth(grapheme.codePointAt(0)!)
}

/** Columns of text that is not all printable ASCII, escape sequences removed. */
function measuredWidth(text: string): number {
  let width = 0
  for (const { segment } of graphemes(text.replace(ESCAPE_SEQUENCES, ''))) width += graphemeWidth(segment)
  return width
}

/** How many terminal columns `text` takes (escape sequences take none). */
export function columnWidth(text: string): number {
  return PRINTABLE_ASCII.test(text) ? text.length : measuredWidth(text)
}

/** `text` cut to at most `width` columns, with `…` where it was cut. */
export function truncateColumns(text: string, width: number): string {
  if (PRINTABLE_ASCII.test(text)) return text.length <= width ? text : `${text.slice(0, Math.max(0, width - 1))}…`
  if (measuredWidth(text) <= width) return text
  let out = ''
  let used = 0
  for (const { segment } of graphemes(text)) {
    const next = graphemeWidth(segment)
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
