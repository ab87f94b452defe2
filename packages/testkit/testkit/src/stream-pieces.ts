/**
 * How the fakes cut text and JSON into stream deltas. Real models send several pieces per
 * block, so clients that forget to concatenate them must fail against the fakes too.
 */

/** Roughly a word per delta, each keeping the whitespace around it. */
export function wordDeltas(text: string): string[] {
  return text.match(/\s*\S+\s*/g) ?? (text ? [text] : [])
}

/** As `wordDeltas`, but a lone word of 2+ characters is halved, so even one word takes two deltas. */
export function textDeltas(text: string): string[] {
  const words = wordDeltas(text)
  if (words.length !== 1 || text.length < 2) return words
  const middle = Math.ceil(text.length / 2)
  return [text.slice(0, middle), text.slice(middle)]
}

/** A JSON string (tool arguments or input) in 2+ fragments, as the APIs stream it; shorter strings as they are. */
export function jsonFragments(json: string): string[] {
  if (json.length < 2) return json ? [json] : []
  const size = Math.ceil(json.length / 3)
  const pieces: string[] = []
  for (let at = 0; at < json.length; at += size) pieces.push(json.slice(at, at + size))
  return pieces
}
