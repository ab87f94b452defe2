import type { Dirent } from 'node:fs'
import { lstat, readdir, stat } from 'node:fs/promises'
import { join } from 'node:path'
import { FileToolError, fsProblem } from './errors.js'
import { globToRegExp } from './glob-pattern.js'
import { nameOf, resolveExisting, type Confinement } from './paths.js'

/**
 * Directories a search never descends into (below where it starts): git's own data and
 * installed packages, which are large, not the project's text, and would crowd every
 * result. ripgrep is told the same (`grep.ts`), so both searches see one tree.
 */
export const SKIPPED_DIRECTORIES: readonly string[] = ['.git', 'node_modules']

export interface ListingLimits {
  /** Entries `ls` shows, and matches `glob` returns. */
  maxResults: number
  /** Entries a `glob` walk looks at before it stops: a bound on the time a huge tree can take. */
  maxWalkEntries: number
}

function describe(entry: Dirent): string {
  if (entry.isDirectory()) return `${entry.name}/`
  if (entry.isSymbolicLink()) return `${entry.name}@`
  return entry.name
}

/** `ls`: a directory's entries sorted by name, directories marked `/` and links `@`. */
export async function listDirectory(confinement: Confinement, path: string | undefined, limits: ListingLimits): Promise<string> {
  const { real, name } = await resolveExisting(confinement, path ?? '.')
  let entries: Dirent[]
  try {
    const info = await stat(real)
    if (!info.isDirectory()) throw new FileToolError('NOT_A_FILE', `${name} is not a directory (read it with read)`)
    entries = await readdir(real, { withFileTypes: true })
  } catch (error) {
    if (error instanceof FileToolError) throw error
    throw new FileToolError('UNREADABLE', `${name} cannot be listed: ${fsProblem(error)}`)
  }
  if (entries.length === 0) return `${name} is empty`
  const names = entries.map(describe).sort(byName)
  const shown = names.slice(0, limits.maxResults)
  const more = names.length - shown.length
  return `${name}:\n${shown.join('\n')}${more > 0 ? `\n… and ${more} more entries (${names.length} in all); narrow it with glob` : ''}`
}

const byName = (a: string, b: string) => (a < b ? -1 : a > b ? 1 : 0)

export interface GlobArgs {
  pattern: string
  path?: string
}

/**
 * `glob`: files under `path` (default the cwd) whose path relative to it matches `pattern`,
 * newest first (by modification time; the same time, by name). The walk skips
 * `SKIPPED_DIRECTORIES`, does not follow links into directories, and stops after
 * `maxWalkEntries` entries; at most `maxResults` matches are returned, and the result says
 * how many more there were.
 */
export async function globFiles(confinement: Confinement, args: GlobArgs, limits: ListingLimits, signal: AbortSignal): Promise<string> {
  const { real, name } = await resolveExisting(confinement, args.path ?? '.')
  const matcher = globToRegExp(args.pattern.startsWith('./') ? args.pattern.slice(2) : args.pattern)
  const matches: { path: string; mtime: number }[] = []
  let matched = 0
  let visited = 0
  let unreadable = 0
  let stoppedEarly = false
  const stack: string[] = ['']
  while (stack.length > 0) {
    if (signal.aborted) throw new FileToolError('TIMED_OUT', 'the call was cancelled')
    const dir = stack.pop()!
    let entries: Dirent[]
    try {
      entries = await readdir(join(real, dir), { withFileTypes: true })
    } catch (error) {
      if (dir === '') throw new FileToolError('UNREADABLE', `${name} cannot be listed: ${fsProblem(error)}`)
      unreadable++
      continue
    }
    for (const entry of entries) {
      if (++visited > limits.maxWalkEntries) {
        stoppedEarly = true
        break
      }
      const relativePath = dir === '' ? entry.name : `${dir}/${entry.name}`
      if (entry.isDirectory()) {
        if (!SKIPPED_DIRECTORIES.includes(entry.name)) stack.push(relativePath)
        continue
      }
      if (!matcher.test(relativePath)) continue
      matched++
      let mtime = 0
      try {
        mtime = (await lstat(join(real, relativePath))).mtimeMs
      } catch {
        // Gone since it was listed: still a match, sorted as the oldest.
      }
      matches.push({ path: relativePath, mtime })
      // Keep the newest maxResults only: a pattern matching a million files holds a bounded list.
      if (matches.length > limits.maxResults * 2) trim(matches, limits.maxResults)
    }
    if (stoppedEarly) break
  }
  trim(matches, limits.maxResults)
  const prefix = name === '.' ? '' : `${name.endsWith('/') ? name : `${name}/`}`
  const lines = matches.map((match) => prefix + match.path)
  const notes: string[] = []
  if (matched > matches.length) notes.push(`${matched - matches.length} more matches not shown (the ${matches.length} newest are); narrow the pattern or the path`)
  if (stoppedEarly) notes.push(`the walk stopped after ${limits.maxWalkEntries} entries, so there may be more; narrow the path`)
  if (unreadable > 0) notes.push(`${unreadable} ${unreadable === 1 ? 'directory' : 'directories'} could not be read`)
  if (lines.length === 0) return [`no files match ${args.pattern} under ${nameOf(confinement, real)}`, ...notes].join('\n')
  return [...lines, ...notes.map((note) => `(${note})`)].join('\n')
}

function trim(matches: { path: string; mtime: number }[], keep: number): void {
  matches.sort((a, b) => b.mtime - a.mtime || byName(a.path, b.path))
  matches.length = Math.min(matches.length, keep)
}
