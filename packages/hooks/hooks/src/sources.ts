/**
 * Hooks on disk beside dsh's own entry, in the one shape Claude Code's settings and Codex's
 * `hooks.json` share: the user's `~/.claude/settings.json` (`claudeUserSettings: true`) and
 * `~/.codex/hooks.json` (`codexUserHooks: true`), and a project's `.claude/settings.json`,
 * `.claude/settings.local.json` (`projectClaudeSettings: true`) and `.codex/hooks.json`
 * (`projectCodexHooks: true`). A cloned repository's files run commands: unasked they are
 * never read, and one that holds hooks is a note saying how to run them.
 */
import { readFileSync } from 'node:fs'
import { homedir } from 'node:os'
import { join } from 'node:path'
import { readHooks, type HookGroup } from './config.js'

export interface SourceFlags {
  claudeUserSettings: boolean
  projectClaudeSettings: boolean
  codexUserHooks?: boolean
  projectCodexHooks?: boolean
}

export function readSources(cwd: string, flags: SourceFlags, note: (line: string) => void, home = process.env.HOME ?? homedir()): HookGroup[] {
  const groups: HookGroup[] = []
  if (flags.claudeUserSettings) groups.push(...readSettings(join(home, '.claude', 'settings.json'), note))
  if (flags.codexUserHooks === true) groups.push(...readSettings(join(home, '.codex', 'hooks.json'), note))
  const project: [file: string, read: boolean, flag: string][] = [
    [join(cwd, '.claude', 'settings.json'), flags.projectClaudeSettings, 'projectClaudeSettings'],
    [join(cwd, '.claude', 'settings.local.json'), flags.projectClaudeSettings, 'projectClaudeSettings'],
    [join(cwd, '.codex', 'hooks.json'), flags.projectCodexHooks === true, 'projectCodexHooks'],
  ]
  for (const [file, read, flag] of project) {
    if (read) groups.push(...readSettings(file, note))
    else if (holdsHooks(file)) note(`${file} has hooks, which are not run: a project's files run commands; set ${flag}: true on the hooks entry of your config to run them`)
  }
  return groups
}

/** The hooks of one settings file; absent is nothing, unreadable or malformed is a note. */
function readSettings(file: string, note: (line: string) => void): HookGroup[] {
  const settings = parse(file, note)
  return settings === undefined ? [] : readHooks(settings.hooks, file, note)
}

function parse(file: string, note?: (line: string) => void): Record<string, unknown> | undefined {
  let text: string
  try {
    text = readFileSync(file, 'utf8')
  } catch (error) {
    if ((error as NodeJS.ErrnoException).code !== 'ENOENT') note?.(`${file}: cannot be read (${(error as Error).message}); its hooks are not run`)
    return undefined
  }
  try {
    const parsed: unknown = JSON.parse(text)
    if (typeof parsed === 'object' && parsed !== null && !Array.isArray(parsed)) return parsed as Record<string, unknown>
    note?.(`${file}: not a JSON object; its hooks are not run`)
  } catch (error) {
    note?.(`${file}: not valid JSON (${(error as Error).message}); its hooks are not run`)
  }
  return undefined
}

function holdsHooks(file: string): boolean {
  const settings = parse(file)
  return settings !== undefined && settings.hooks !== undefined
}
