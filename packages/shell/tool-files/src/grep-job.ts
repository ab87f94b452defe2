/** What one search asks, for ripgrep's arguments or the worker's walk alike. */
export interface GrepJob {
  regex: string
  ignoreCase: boolean
  mode: GrepMode
  before: number
  after: number
  /** Where the search starts (a real path: a directory or one file). */
  start: string
  /** What is put before a path relative to `start` to show it (`''` at the cwd, `src/` below it). */
  shownPrefix: string
  /** File filters, as regular expression sources and whether each matches the name alone. */
  globs: { regexp: string; nameOnly: boolean }[]
  /** A `type` filter's extensions (fallback only; ripgrep knows its own types). */
  extensions?: string[]
  skip: readonly string[]
  maxLineChars: number
  maxOutputChars: number
  maxFileBytes: number
  maxWalkEntries: number
  anyShown?: boolean
}

export type GrepMode = 'content' | 'files_with_matches' | 'count'

export const GREP_MODES: readonly GrepMode[] = ['content', 'files_with_matches', 'count']

/**
 * The file types the fallback knows for `type` (ripgrep knows many more). A type it does not
 * know is refused in one line naming these, rather than searching everything.
 */
export const FALLBACK_TYPES: Readonly<Record<string, readonly string[]>> = {
  c: ['.c', '.h'],
  cpp: ['.cpp', '.cc', '.cxx', '.hpp', '.hh', '.hxx', '.h'],
  css: ['.css'],
  go: ['.go'],
  html: ['.html', '.htm'],
  java: ['.java'],
  js: ['.js', '.mjs', '.cjs', '.jsx'],
  json: ['.json'],
  markdown: ['.md', '.markdown'],
  md: ['.md', '.markdown'],
  py: ['.py', '.pyi'],
  rust: ['.rs'],
  sh: ['.sh', '.bash'],
  toml: ['.toml'],
  ts: ['.ts', '.tsx', '.mts', '.cts'],
  yaml: ['.yaml', '.yml'],
}
