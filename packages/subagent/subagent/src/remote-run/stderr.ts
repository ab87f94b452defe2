/** How much of a child's stderr a diagnostic quotes. */
export const STDERR_QUOTE_CHARS = 600

/**
 * The last of a child's stderr as one plain line: colours stripped (Codex logs with ANSI
 * escapes), white space folded, at most `STDERR_QUOTE_CHARS` long (the end is kept: the
 * last lines say why it stopped).
 */
export function quoteStderr(stderr: string): string {
  const plain = stderr.replace(/\x1b\[[0-9;]*m/g, '').replace(/\s+/g, ' ').trim()
  return plain.length > STDERR_QUOTE_CHARS ? `…${plain.slice(-STDERR_QUOTE_CHARS)}` : plain
}
