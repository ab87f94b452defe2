/**
 * Split reply text into a few stream pieces at word starts, so consumers see a real
 * multi-chunk stream: at least two pieces when the text has two or more words, pieces of
 * about 16 characters for short texts, and no more than about eight for long ones (each
 * chunk costs the consumer an event, and benchmarks play thousands of replies).
 */
export function splitText(text: string): string[] {
  if (text === '') return []
  const words = text.split(/(?<=\s)(?=\S)/)
  const target = Math.max(Math.ceil(text.length / 8), Math.min(16, Math.ceil(text.length / 2)))
  const pieces: string[] = []
  let piece = ''
  for (const word of words) {
    if (piece !== '' && piece.length + word.length > target) {
      pieces.push(piece)
      piece = word
    } else {
      piece += word
    }
  }
  pieces.push(piece)
  return pieces
}
