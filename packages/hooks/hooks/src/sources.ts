/**
 * Hooks on disk beside dsh's own entry, in the one shape Claude Code's settings and Codex's
 * `hooks.json` share: the user's `~/.claude/settings.json` (`claudeUserSettings: true`) and
 * `~/.codex/hooks.json` (`codexUserHooks: true`), and a project's `.claude/settings.json`,
 * `.claude/settings.local.json` (`projectClaudeSettings: true`) and `.codex/hooks.json`
 * (`projectCodexHooks: true`). A cloned repository's files run commands: unasked they are
 * never read, and one that holds hooks is a note saying how to run them. Where the host
 * binds them to directories (`trustedProjectFiles`, which the dsh CLI fills from `dsh
 * trust`'s record), a project file runs only when its bytes are the ones the user trusted
 * in this directory.
 */
import { createHash } from 'node:crypto'
import { readFileSync, realpathSync } from 'node:fs'
import { homedir } from 'node:os'
import { join } from 'node:path'
import { readHooks, type HookGroup } from './config.js'

export interface SourceFlags {
  claudeUserSettings: boolean
  projectClaudeSettings: boolean
  codexUserHooks?: boolean
  projectCodexHooks?: boolean
  /**
   * The project hook files the user trusted, by absolute path (the directory's real path and
   * the file's name) to the SHA-256 (hex) of their bytes. Absent: the host does not bind
   * project files to directories and the flags alone decide (an embedding); present (the dsh
   * CLI, always), a project file runs only when its bytes have that digest.
   */
  trustedProjectFiles?: Readonly<Record<string, string>>
}

/** A project's hook files, relative to its directory, in the order they run (`dsh trust` records these). */
export const PROJECT_HOOK_FILES = ['.claude/settings.json', '.claude/settings.local.json', '.codex/hooks.json'] as const

export function readSources(cwd: string, flags: SourceFlags, note: (line: string) => void, home = process.env.HOME ?? homedir()): HookGroup[] {
  const groups: HookGroup[] = []
  if (flags.claudeUserSettings) groups.push(...readSettings(join(home, '.claude', 'settings.json'), note))
  if (flags.codexUserHooks === true) groups.push(...readSettings(join(home, '.codex', 'hooks.json'), note))
  const trusted = flags.trustedProjectFiles
  const dir = trusted === undefined ? cwd : realDirectory(cwd)
  for (const name of PROJECT_HOOK_FILES) {
    const file = join(cwd, name)
    const flag = name.startsWith('.codex/') ? 'projectCodexHooks' : 'projectClaudeSettings'
    if (flags[flag] !== true) {
      if (holdsHooks(file)) note(`${file} has hooks, which are not run: a project's files run commands; set ${flag}: true on the hooks entry of your config to run them`)
      continue
    }
    if (trusted === undefined) {
      groups.push(...readSettings(file, note))
      continue
    }
    // The very bytes whose digest is checked are the ones read: a change after the check is not run.
    const bytes = readBytes(file, note)
    if (bytes === undefined) continue
    if (trusted[join(dir, name)] === createHash('sha256').update(bytes).digest('hex')) {
      const settings = parseText(bytes.toString('utf8'), file, note)
      if (settings !== undefined) groups.push(...readHooks(settings.hooks, file, note))
    } else if (parseText(bytes.toString('utf8'), file)?.hooks !== undefined) {
      note(`${file} has hooks, which are not run: you have not trusted this directory's hook files, or the file changed since you did; read it, then run \`dsh trust\` in ${dir} to run them here`)
    }
  }
  return groups
}

/** The hooks of one settings file; absent is nothing, unreadable or malformed is a note. */
function readSettings(file: string, note: (line: string) => void): HookGroup[] {
  const settings = parse(file, note)
  return settings === undefined ? [] : readHooks(settings.hooks, file, note)
}

function parse(file: string, note?: (line: string) => void): Record<string, unknown> | undefined {
  const bytes = readBytes(file, note)
  return bytes === undefined ? undefined : parseText(bytes.toString('utf8'), file, note)
}

/** A file's bytes; absent is nothing, unreadable is a note. */
function readBytes(file: string, note?: (line: string) => void): Buffer | undefined {
  try {
    return readFileSync(file)
  } catch (error) {
    if ((error as NodeJS.ErrnoException).code !== 'ENOENT') note?.(`${file}: cannot be read (${(error as Error).message}); its hooks are not run`)
    return undefined
  }
}

function parseText(text: string, file: string, note?: (line: string) => void): Record<string, unknown> | undefined {
  try {
    const parsed: unknown = JSON.parse(text)
    if (typeof parsed === 'object' && parsed !== null && !Array.isArray(parsed)) return parsed as Record<string, unknown>
    note?.(`${file}: not a JSON object; its hooks are not run`)
  } catch (error) {
    note?.(`${file}: not valid JSON (${(error as Error).message}); its hooks are not run`)
  }
  return undefined
}

/** The directory's real path (as `dsh trust` records it), or as given when it cannot be resolved. */
function realDirectory(dir: string): string {
  try {
    return realpathSync(dir)
  } catch {
    return dir
  }
}

function holdsHooks(file: string): boolean {
  const settings = parse(file)
  return settings !== undefined && settings.hooks !== undefined
}
