/**
 * Colour for what `dsh run` draws on a terminal: plain ANSI SGR codes, no library. Only
 * the terminal view paints; a pipe's bytes (the answer, `--json`, the plain progress
 * lines) are never coloured, so a script reads what it read before.
 */

/** What a piece of terminal output is, as far as its colour goes. */
export type Tone = 'ok' | 'failed' | 'cancelled' | 'running' | 'tool' | 'warning' | 'error' | 'dim'

const CODES: Record<Tone, string> = {
  ok: '32', // green
  failed: '31', // red
  error: '31',
  cancelled: '33', // yellow
  warning: '33',
  running: '36', // cyan
  tool: '36',
  dim: '2',
}

export interface Palette {
  readonly enabled: boolean
  paint(tone: Tone, text: string): string
}

export const NO_COLOR_PALETTE: Palette = { enabled: false, paint: (_tone, text) => text }

const COLOR_PALETTE: Palette = { enabled: true, paint: (tone, text) => (text ? `\x1b[${CODES[tone]}m${text}\x1b[0m` : text) }

export function palette(enabled: boolean): Palette {
  return enabled ? COLOR_PALETTE : NO_COLOR_PALETTE
}

/**
 * Whether to paint: only on a terminal, and not when the user said no, by `--no-color` or
 * by a non-empty `NO_COLOR` (no-color.org: an empty one is as if unset).
 */
export function colorWanted(options: { tty: boolean; noColorFlag?: boolean; env?: NodeJS.ProcessEnv }): boolean {
  const env = options.env ?? process.env
  return options.tty && options.noColorFlag !== true && !env.NO_COLOR
}

/** The tone of a framework log line (`[warn] subagents: …`) or of a `dsh:` notice, judged by how it starts. */
export function toneOfLine(line: string): Tone | undefined {
  if (/^\[(error|fatal)\]/.test(line)) return 'error'
  if (/^\[warn\]/.test(line) || /^dsh: budget /.test(line)) return 'warning'
  return undefined
}
