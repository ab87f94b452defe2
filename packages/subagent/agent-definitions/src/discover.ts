/**
 * Where definitions are found and how directories combine: `./.dsh/agents/` (the
 * project's), `./.claude/agents/` when asked for (a team's Claude Code files), directories
 * named in config, then `~/.dsh/agents/` (the user's). The first directory with a name
 * wins, except that the user's own file (`~/.dsh/agents`, or a directory outside the project
 * named in config) always wins over a project's; each shadowed file is a note. Loading is all or nothing: any bad file fails the
 * whole load, so no set of helpers is ever half registered.
 */
import { readdirSync, realpathSync, statSync } from 'node:fs'
import { homedir } from 'node:os'
import { isAbsolute, join, relative, resolve, sep } from 'node:path'
import { DefinitionError } from './errors.js'
import { readFrontMatterFile, readProblem } from './front-matter.js'
import { MAX_DEFINITION_BYTES, parseDefinition } from './parse.js'
import type { AgentDefinition, DefinitionFlavour, DefinitionSet, DefinitionSource } from './types.js'

export interface DefinitionDirs {
  /** The project directory (`./.dsh/agents` and `./.claude/agents` are under it). Default: the process's cwd. */
  cwd?: string
  /** dsh's home (`~/.dsh/agents` is under it). Default: `$DSH_HOME`, else `~/.dsh`. */
  home?: string
  /** Read `./.dsh/agents` (default true). */
  project?: boolean
  /** Read `<home>/agents` (default true). */
  user?: boolean
  /** Read `./.claude/agents` as Claude Code files (default false). */
  claudeCode?: boolean
  /** More directories (absolute, or relative to `cwd`); each must exist. */
  dirs?: readonly string[]
}

interface Directory {
  path: string
  origin: DefinitionSource['origin']
  flavour: DefinitionFlavour
  /** A directory named in config must exist; the conventional ones are optional. */
  required: boolean
}

/** The directories `options` name, most important first. */
export function definitionDirectories(options: DefinitionDirs = {}): Directory[] {
  const cwd = resolve(options.cwd ?? process.cwd())
  const home = resolve(options.home ?? (process.env.DSH_HOME || join(homedir(), '.dsh')))
  const dirs: Directory[] = []
  const user = join(home, 'agents')
  // Started in the home directory, the project's agents directory is the user's own: its
  // files are the user's, and keep their rules (see `fromProject`).
  const project = join(cwd, '.dsh', 'agents')
  if (options.project !== false) dirs.push({ path: project, origin: project === user && options.user !== false ? 'user' : 'project', flavour: 'dsh', required: false })
  if (options.claudeCode === true) dirs.push({ path: join(cwd, '.claude', 'agents'), origin: 'claude-code', flavour: 'claude-code', required: false })
  for (const dir of options.dirs ?? []) {
    const path = resolve(cwd, dir)
    dirs.push({ path, origin: configDirOrigin(path, cwd, home), flavour: 'dsh', required: true })
  }
  if (options.user !== false) dirs.push({ path: user, origin: 'user', flavour: 'dsh', required: false })
  return dirs
}

/**
 * The origin of a directory named in config: inside the project (under `cwd`), its files
 * came with the project whatever config named it (a trusted `./dsh.yml` naming `./team`
 * trusts the config, not the files added to `team/` later), so they are `project` files
 * and may only narrow (see `fromProject`). Outside the project, or in dsh's home (`~/.dsh`,
 * where `agents/` is; a project is never cloned there), they are the user's (`config`).
 * Both the path as written and where its links lead count, so a link cannot carry a
 * project's directory out of the project, nor into dsh's home.
 */
function configDirOrigin(path: string, cwd: string, home: string): 'project' | 'config' {
  const forms = (dir: string) => withRealPath(dir)
  const within = (candidate: string, dir: string) => forms(dir).some((container) => isWithin(candidate, container))
  const inDshHome = forms(path).every((candidate) => within(candidate, home)) && !forms(cwd).some((candidate) => within(candidate, home))
  if (inDshHome) return 'config'
  return forms(path).some((candidate) => within(candidate, cwd)) ? 'project' : 'config'
}

/** `path` and, when it exists and differs, where its links lead. */
function withRealPath(path: string): string[] {
  try {
    const real = realpathSync(path)
    return real === path ? [path] : [path, real]
  } catch {
    // Absent: the load refuses a named directory that does not exist, naming it.
    return [path]
  }
}

function isWithin(path: string, dir: string): boolean {
  const rel = relative(dir, path)
  return rel === '' || (rel !== '..' && !rel.startsWith(`..${sep}`) && !isAbsolute(rel))
}

/** Read every definition `options` point at. Throws `DefinitionError` naming the file. */
export function loadDefinitions(options: DefinitionDirs = {}): DefinitionSet {
  const byName = new Map<string, AgentDefinition>()
  const notes: string[] = []
  const warnings: string[] = []
  const seenDirs = new Set<string>()
  for (const dir of definitionDirectories(options)) {
    if (seenDirs.has(dir.path)) continue
    seenDirs.add(dir.path)
    const here = new Map<string, string>()
    for (const file of definitionFiles(dir)) {
      const { definition, notes: fileNotes, warnings: fileWarnings } = parseDefinition(readDefinitionFile(file), file, dir.origin, dir.flavour)
      const twin = here.get(definition.name)
      if (twin !== undefined) throw new DefinitionError('DUPLICATE_NAME', `${file}:${definition.source.lines.name ?? 1}: "${definition.name}" is also defined by ${twin}; one directory defines each name once`)
      here.set(definition.name, file)
      notes.push(...fileNotes)
      const winner = byName.get(definition.name)
      if (winner !== undefined && !(cloned(winner) && !cloned(definition))) {
        notes.push(`${file}: note: "${definition.name}" is shadowed by ${winner.source.file} (${winner.source.origin} definitions win)`)
        continue
      }
      if (winner !== undefined) {
        // A cloned file never replaces the user's own helper of the same name: that would
        // drop the user's ask and deny rules and tool list for the project's.
        const warning = `${winner.source.file}: "${definition.name}" is also defined by your own ${file}, which is used: a project's file does not replace your helper (rename one of them to have both)`
        warnings.push(warning)
        notes.push(warning)
      }
      byName.set(definition.name, definition)
      // Only a definition that is used: a shadowed file's rules change nothing.
      warnings.push(...fileWarnings)
      notes.push(...fileWarnings)
    }
  }
  return { definitions: [...byName.values()], notes, warnings }
}

/** Whether a definition came with the project (its files, or its Claude Code files), as opposed to the user's own. */
function cloned(definition: AgentDefinition): boolean {
  return definition.source.origin === 'project' || definition.source.origin === 'claude-code'
}

/** The `*.md` files of `dir`, sorted by name (a stable order for the tool's rendering). */
function definitionFiles(dir: Directory): string[] {
  let names: string[]
  try {
    names = readdirSync(dir.path)
  } catch (error) {
    const code = (error as NodeJS.ErrnoException).code
    if (code === 'ENOENT' && !dir.required) return []
    if (code === 'ENOENT') throw new DefinitionError('MISSING_DIR', `${dir.path}: the agents directory named in config does not exist`)
    throw new DefinitionError('UNREADABLE', `${dir.path}: cannot read the agents directory: ${readProblem(error)}`)
  }
  const files: string[] = []
  for (const name of names.filter((entry) => entry.endsWith('.md')).sort()) {
    const file = join(dir.path, name)
    let isFile: boolean
    try {
      // Follows symlinks: a loop is ELOOP here, named, not a hang.
      isFile = statSync(file).isFile()
    } catch (error) {
      throw new DefinitionError('UNREADABLE', `${file}: cannot read the definition: ${readProblem(error)}`)
    }
    if (isFile) files.push(file)
  }
  return files
}

/** The file's text, read at most `MAX_DEFINITION_BYTES` + 1 bytes: a huge file is refused, not loaded. */
function readDefinitionFile(file: string): string {
  return readFrontMatterFile(file, MAX_DEFINITION_BYTES, 'definition', "a helper's instructions are a page, not a document")
}
