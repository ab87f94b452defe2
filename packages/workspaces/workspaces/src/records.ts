/**
 * The records on disk (`<dir>/records/<id>.json`): how one is read and checked, and who
 * may act on the workspace it describes. A record is written by dsh alone (0600, in the
 * user's dsh home), but what it names is handed to git and to `rm -r`, so nothing read
 * back is trusted unchecked: a record that dsh would never have written (a base that is
 * not a commit id, a root outside the workspaces directory, an id or a branch that is not
 * dsh's own form) is an orphan with a reason, and nothing it names is ever acted on.
 */
import { readdirSync, readFileSync, realpathSync } from 'node:fs'
import { basename, dirname, isAbsolute, join, relative, resolve, sep } from 'node:path'
import { errorMessage, isRecord } from '@dsh/base'
import type { InvalidWorkspaceRecord, WorkspaceRecord } from './types.js'

/** A workspace's id, as `create` makes it: a name word, the child's id's tail, a random tail. */
const WORKSPACE_ID = /^[A-Za-z0-9][A-Za-z0-9-]{0,127}$/
/** A branch as `create` names it. */
const BRANCH = /^dsh\/[A-Za-z0-9][A-Za-z0-9-]{0,127}$/
/** A full commit id (SHA-1 or SHA-256). */
const COMMIT_ID = /^(?:[0-9a-f]{40}|[0-9a-f]{64})$/

/** The records in `dir` that passed their checks (what is acted on). */
export function validRecords(dir: string): WorkspaceRecord[] {
  return readRecords(dir).filter((record): record is WorkspaceRecord => !('invalid' in record))
}

/** Every record in `dir`, each either checked or an invalid one with its reason; sorted by file name. */
export function readRecords(dir: string): Array<WorkspaceRecord | InvalidWorkspaceRecord> {
  let names: string[]
  try {
    names = readdirSync(join(dir, 'records'))
  } catch {
    return []
  }
  const found: Array<WorkspaceRecord | InvalidWorkspaceRecord> = []
  // Records are written whole (a temporary file renamed), so a `.json` is never half written.
  for (const name of names.filter((entry) => entry.endsWith('.json')).sort()) {
    const file = join(dir, 'records', name)
    const id = name.slice(0, -'.json'.length)
    let value: unknown
    try {
      value = JSON.parse(readFileSync(file, 'utf8')) as unknown
    } catch (error) {
      found.push({ id, file, orphaned: true, invalid: error instanceof SyntaxError ? 'the record is not JSON' : `the record cannot be read: ${errorMessage(error)}` })
      continue
    }
    const problem = recordProblem(value, dir, id)
    found.push(problem === undefined ? (value as WorkspaceRecord) : { id, file, orphaned: true, invalid: problem, ...(isRecord(value) && typeof value.childId === 'string' && { childId: value.childId }) })
  }
  return found
}

/** Why `value`, read from `<dir>/records/<id>.json`, is not a record dsh wrote; `undefined` when it is one. */
export function recordProblem(value: unknown, dir: string, id: string): string | undefined {
  if (!isRecord(value)) return 'the record is not an object'
  if (value.id !== id || !WORKSPACE_ID.test(id)) return `its id ${JSON.stringify(value.id)} is not the record's own name in dsh's form`
  if (value.mode !== 'worktree' && value.mode !== 'copy') return `its mode ${JSON.stringify(value.mode)} is neither worktree nor copy`
  for (const key of ['childId', 'tree', 'createdAt'] as const) {
    if (typeof value[key] !== 'string' || value[key] === '') return `its ${key} is not a string`
  }
  if (value.state !== 'live' && value.state !== 'kept') return `its state ${JSON.stringify(value.state)} is neither live nor kept`
  if (typeof value.pid !== 'number' || !Number.isSafeInteger(value.pid) || value.pid <= 0) return 'its pid is not a process id'
  if (typeof value.root !== 'string' || !isWorkspaceRoot(value.root, dir, id)) return `its root ${JSON.stringify(value.root)} is not in ${join(dir, 'trees')} under its own id`
  if (typeof value.path !== 'string' || !inside(value.path, value.root)) return `its path ${JSON.stringify(value.path)} is not in its root`
  if (typeof value.source !== 'string' || !isAbsolute(value.source)) return 'its source is not an absolute directory'
  // Handed to git as a revision: only a commit id (a copy's is empty until its first commit).
  if (typeof value.base !== 'string' || !(COMMIT_ID.test(value.base) || (value.mode === 'copy' && value.base === ''))) return `its base ${JSON.stringify(value.base)} is not a commit id`
  if (value.mode === 'worktree') {
    if (typeof value.branch !== 'string' || !BRANCH.test(value.branch)) return `its branch ${JSON.stringify(value.branch)} is not a dsh/ branch`
    if (typeof value.repository !== 'string' || !isAbsolute(value.repository)) return 'its repository is not an absolute directory'
    // Older records have no git directories: their repository is used to remove them.
    for (const key of ['gitDir', 'worktreeGitDir'] as const) {
      if (value[key] !== undefined && (typeof value[key] !== 'string' || !isAbsolute(value[key]))) return `its ${key} is not an absolute directory`
    }
    if (typeof value.gitDir === 'string' && typeof value.worktreeGitDir === 'string' && !inside(value.worktreeGitDir, value.gitDir)) return 'its worktree\'s git directory is not in its repository\'s'
  } else if (value.branch !== undefined || value.repository !== undefined || value.gitDir !== undefined || value.worktreeGitDir !== undefined) {
    return 'a copy names a branch or a repository'
  }
  if (value.label !== undefined && typeof value.label !== 'string') return 'its label is not a string'
  if (value.parentAgent !== undefined && typeof value.parentAgent !== 'string') return 'its parentAgent is not a string'
  if (value.ancestorAgents !== undefined && !(Array.isArray(value.ancestorAgents) && value.ancestorAgents.every((agent) => typeof agent === 'string'))) return 'its ancestorAgents is not a list of agent ids'
  if (value.derivedFrom !== undefined && (typeof value.derivedFrom !== 'string' || !WORKSPACE_ID.test(value.derivedFrom))) return 'its derivedFrom is not a workspace id'
  return undefined
}

/**
 * The agents that may merge, discard or read a workspace: the one that delegated (its
 * `parentAgent`) and that agent's ancestors, as they were when it was made. A record from
 * before the delegating agent was recorded: only its tree's root.
 */
export function actingAgents(record: WorkspaceRecord): string[] {
  return record.parentAgent === undefined ? [record.tree] : [record.parentAgent, ...(record.ancestorAgents ?? [])]
}

/** Whether `root` is `<dir>/trees/<id>`, as written or after resolving symbolic links. */
function isWorkspaceRoot(root: string, dir: string, id: string): boolean {
  if (!isAbsolute(root) || resolve(root) !== root || basename(root) !== id) return false
  const trees = join(dir, 'trees')
  if (dirname(root) === resolve(trees)) return true
  try {
    return realpathSync(dirname(root)) === realpathSync(trees)
  } catch {
    return false
  }
}

/** Whether `path` is `dir` or below it (lexically, after resolving `.` and `..`). */
export function inside(path: string, dir: string): boolean {
  if (!isAbsolute(path) || !isAbsolute(dir)) return false
  const below = relative(resolve(dir), resolve(path))
  return below === '' || (below !== '..' && !below.startsWith(`..${sep}`) && !isAbsolute(below))
}
