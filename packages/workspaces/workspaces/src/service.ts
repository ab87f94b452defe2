/**
 * `ctx.workspaces`: workspaces of their own for children. `worktree` is a git worktree of
 * the parent's repository on a new branch (`dsh/<label>-<id>`) from the parent's current
 * commit; `copy` is a copy of a directory that is not a repository, tracked by a git
 * directory of dsh's own outside it. What the child changed is read from git when its
 * run ends (`changes`), becomes part of its result, and is brought back into the parent's
 * tree (`merge`) or thrown away (`discard`). A workspace with no changes is removed when
 * its child is done (`release`); one with changes is kept until merged or discarded.
 *
 * Every workspace is a record on disk (`<dir>/records/<id>.json`) written before the
 * worktree exists and removed after it is gone, so a run killed with SIGKILL leaves a
 * record naming what it left: the next `dsh` start reports orphans, `dsh workspaces
 * list` shows them and `clean` removes them.
 *
 * A worktree starts from a commit: a parent tree with uncommitted changes to tracked files
 * is refused (commit or stash them, or use `copy` or the shared directory), and so is a
 * repository with submodules (a worktree would not carry them).
 *
 * Operations that write one place run one at a time (`serial`): per repository for
 * worktrees, per directory copied for copies. A workspace made from another's directory (a
 * grandchild's from its parent's) records it (`derivedFrom`), and that one stays while it
 * lives or is kept.
 */
import { randomBytes } from 'node:crypto'
import { cpSync, existsSync, mkdirSync, realpathSync, renameSync, rmSync, writeFileSync } from 'node:fs'
import { homedir } from 'node:os'
import { basename, isAbsolute, join, relative, resolve, sep } from 'node:path'
import { Context, Service } from 'cordis'
import Schema from 'schemastery'
import { errorMessage } from '@dsh/base'
import { processAlive } from '@dsh/process'
import type { WorkspaceRef } from '@dsh/session'
import { gitArgs, parentTreeArgs, readChanges } from './changes.js'
import { WorkspaceError } from './errors.js'
import { git, gitCommit, gitResult } from './git.js'
import { mergeCopy, mergeWorktree } from './merge.js'
import { inside, readRecords, validRecords } from './records.js'
import type { ListedWorkspace, MergeOutcome, WorkspaceChanges, WorkspaceRecord, WorkspaceRequest } from './types.js'

declare module 'cordis' {
  interface Context {
    workspaces: WorkspaceService
  }
}

export class WorkspaceService extends Service {
  static Config: Schema<WorkspaceService.Config> = Schema.object({
    dir: Schema.string().min(1).description('Where workspaces and their records live (default: $DSH_HOME/workspaces, else ~/.dsh/workspaces).'),
    maxLivePerTree: Schema.natural().min(1).max(1000).default(8).description('Most workspaces one delegation tree may have live at once; more are refused.'),
  })

  readonly dir: string
  private readonly maxLivePerTree: number
  /** This process's workspaces by child id. */
  private readonly mine = new Map<string, WorkspaceRecord>()
  /**
   * Workspaces being made, by child id, until they exist or have failed: they count against
   * `maxLivePerTree` (so workspaces asked for at once cannot together pass it), and one
   * being made from a workspace's directory holds that workspace.
   */
  private readonly creating = new Map<string, { tree: string; source: string }>()
  /**
   * One operation at a time per place written (`serial`): a repository's git directory for
   * worktrees (git's locks would refuse a second, and merges must not interleave), the
   * directory copied for copies (two copies written back at once could each miss the
   * other's write and lose it).
   */
  private readonly locks = new Map<string, Promise<unknown>>()

  constructor(ctx: Context, config: Partial<WorkspaceService.Config> = {}) {
    super(ctx, 'workspaces')
    this.dir = resolve(config.dir ?? join(process.env.DSH_HOME ? resolve(process.env.DSH_HOME) : join(homedir(), '.dsh'), 'workspaces'))
    this.maxLivePerTree = config.maxLivePerTree ?? 8
    // What a killed run left behind is said once, at the next start that composes this service.
    const home = ctx
    void this.list().then(
      (listed) => {
        const orphans = listed.filter((record) => record.orphaned)
        const named = orphans.map((record) => (record.invalid !== undefined ? `${record.file}: ${record.invalid}` : record.root))
        if (orphans.length > 0) home.logger('workspaces').warn('%d orphaned workspace%s from a run that ended without cleaning up (%s): dsh workspaces list shows them, dsh workspaces clean removes them', orphans.length, orphans.length === 1 ? '' : 's', named.slice(0, 3).join(', '))
      },
      () => undefined,
    )
  }

  /** Make a workspace for a child; nothing is left behind when it fails. */
  async create(request: WorkspaceRequest): Promise<{ ref: WorkspaceRef; record: WorkspaceRecord }> {
    if (!isAbsolute(request.source)) throw new WorkspaceError('INVALID', `a workspace is made from an absolute directory (got ${JSON.stringify(request.source)})`)
    if (typeof request.parentAgent !== 'string' || request.parentAgent === '' || !Array.isArray(request.ancestorAgents) || !request.ancestorAgents.every((agent) => typeof agent === 'string')) {
      throw new WorkspaceError('INVALID', 'a workspace is made for a delegation: parentAgent (the delegating agent\'s id) and ancestorAgents (its ancestors\' ids) are needed')
    }
    if (this.mine.has(request.childId) || this.creating.has(request.childId)) throw new WorkspaceError('INVALID', `child ${request.childId} has a workspace already`)
    // Counted with those being made, and reserved before the first wait: asked for at once, they cannot together pass the limit.
    const live = [...this.mine.values()].filter((record) => record.tree === request.tree && record.state === 'live').length + [...this.creating.values()].filter((making) => making.tree === request.tree).length
    if (live >= this.maxLivePerTree) {
      throw new WorkspaceError('TOO_MANY', `this delegation tree already has ${live} live workspaces, the most allowed (workspaces.maxLivePerTree ${this.maxLivePerTree}); merge or discard some, or give the child the shared directory`)
    }
    this.creating.set(request.childId, { tree: request.tree, source: request.source })
    try {
      let source: string
      try {
        source = realpathSync(request.source)
      } catch (error) {
        throw new WorkspaceError('INVALID', `a workspace cannot be made from ${request.source}: ${errorMessage(error)}`)
      }
      this.creating.set(request.childId, { tree: request.tree, source })
      const id = `${slug(request.label)}-${request.childId.slice(-8).replace(/[^A-Za-z0-9]/g, '')}-${randomBytes(2).toString('hex')}`
      mkdirSync(join(this.dir, 'records'), { recursive: true })
      mkdirSync(join(this.dir, 'trees'), { recursive: true })
      // Its real path: a workspace made from this one's directory is found by it (`derivedFrom`).
      const root = join(realpathSync(join(this.dir, 'trees')), id)
      const holder = this.workspaceHolding(source)
      const fields = {
        id,
        childId: request.childId,
        tree: request.tree,
        root,
        source,
        ...(request.label !== undefined && { label: request.label }),
        createdAt: new Date().toISOString(),
        pid: process.pid,
        state: 'live' as const,
        parentAgent: request.parentAgent,
        ancestorAgents: [...request.ancestorAgents],
        ...(holder !== undefined && { derivedFrom: holder.id }),
      }
      const record = request.mode === 'worktree' ? await this.makeWorktree(fields, holder) : await this.makeCopy(fields)
      this.mine.set(request.childId, record)
      const ref: WorkspaceRef = { mode: record.mode, path: record.path, source: record.source, ...(record.branch !== undefined && { branch: record.branch }), base: record.base, ...(record.gitDir !== undefined && { gitDir: record.gitDir }) }
      return { ref, record }
    } finally {
      this.creating.delete(request.childId)
    }
  }

  /** A worktree of the repository `fields.source` is in; `holder`: the workspace of ours that directory is in (a grandchild's made from its parent's). */
  private async makeWorktree(fields: RecordFields, holder: WorkspaceRecord | undefined): Promise<WorkspaceRecord> {
    const { source, root, id } = fields
    if (holder?.mode === 'copy') throw new WorkspaceError('NOT_A_REPOSITORY', `${source} is in subagent ${holder.childId}'s copy, which is not a repository, so a child cannot have a worktree of it; use workspace: copy or shared`)
    const at = parentTreeArgs(holder)
    const top = await gitResult(source, [...at, 'rev-parse', '--show-toplevel'])
    if (top.code !== 0) throw new WorkspaceError('NOT_A_REPOSITORY', `${source} is not in a git repository, so a child cannot have a worktree of it; use workspace: copy (a copy of the directory) or shared`)
    const repository = top.stdout.trim()
    // A repository whose config moves its work tree elsewhere (`core.worktree`) would have dsh merge into that place: only the one that holds the directory.
    if (!inside(source, repository) && !inside(source, realOrSame(repository))) throw new WorkspaceError('NOT_A_REPOSITORY', `the repository ${source} is in says its files are in ${repository}, which does not hold ${source} (core.worktree?), so dsh will not make a worktree of it; use workspace: copy or shared`)
    // The repository's git directory, which every worktree of it (a grandchild's made from a child's too) writes to: the lock.
    const gitDir = resolve(repository, (await git(repository, [...at, 'rev-parse', '--git-common-dir'], 'finding the git directory')).trim())
    return this.serial(gitDir, async () => {
      const head = await gitResult(repository, [...at, 'rev-parse', '--verify', '--quiet', 'HEAD'])
      if (head.code !== 0) throw new WorkspaceError('NOT_A_REPOSITORY', `the repository ${repository} has no commit yet, so a worktree has nothing to start from; commit first, or use workspace: copy`)
      const dirty = (await git(repository, [...at, 'status', '--porcelain', '--untracked-files=no', '--ignore-submodules=dirty', '-z'], 'reading the parent\'s tree')).split('\0').filter(Boolean)
      if (dirty.length > 0) {
        const named = dirty.slice(0, 5).map((entry) => entry.slice(3)).join(', ')
        throw new WorkspaceError('DIRTY_TREE', `the parent's tree has uncommitted changes (${dirty.length} ${dirty.length === 1 ? 'file' : 'files'}: ${named}${dirty.length > 5 ? ', …' : ''}); a child's worktree starts from a commit, so commit or stash them first, or use workspace: copy or shared`)
      }
      // A submodule is a commit in the tree (a gitlink); read from the tree alone, never by `git submodule`, which runs git inside each one, with its own config.
      if ((await git(repository, [...at, 'ls-tree', '-r', '--format=%(objecttype)', head.stdout.trim()], 'listing submodules')).split('\n').includes('commit')) {
        throw new WorkspaceError('SUBMODULES', `the repository ${repository} has submodules, which a worktree would not carry; use workspace: copy or shared`)
      }
      const branch = `dsh/${id}`
      const exists = await gitResult(repository, [...at, 'rev-parse', '--verify', '--quiet', `refs/heads/${branch}`])
      if (exists.code === 0) throw new WorkspaceError('BRANCH_EXISTS', `the branch ${branch} exists already; delete it or run again (each child gets a new name)`)
      const base = head.stdout.trim()
      const within = relative(repository, source)
      const record: WorkspaceRecord = { ...fields, mode: 'worktree', path: within === '' ? root : join(root, within), repository, gitDir, branch, base }
      // The record first: a process killed between the two still names what it made.
      this.writeRecord(record)
      try {
        await git(repository, [...at, 'worktree', 'add', '--quiet', '-b', branch, root, base], 'making the worktree')
        // Read now, before any child has run in it: later reads never trust its `.git` file.
        record.worktreeGitDir = resolve(root, (await git(root, ['rev-parse', '--git-dir'], 'finding the worktree\'s git directory')).trim())
        this.writeRecord(record)
      } catch (error) {
        // Whatever `worktree add` made before it failed (the branch is made first), then the record.
        await gitResult(repository, [...at, 'worktree', 'remove', '--force', '--force', root])
        await gitResult(repository, [...at, 'worktree', 'prune'])
        await gitResult(repository, [...at, 'branch', '-D', '--', branch])
        this.removeRecord(record)
        throw error
      }
      return record
    })
  }

  private makeCopy(fields: RecordFields): Promise<WorkspaceRecord> {
    const { source, root } = fields
    // Copied alone: not while a copy is being written back into the same directory.
    return this.serial(source, () => this.copyNow({ ...fields, mode: 'copy', path: root, base: '' }))
  }

  private async copyNow(record: WorkspaceRecord): Promise<WorkspaceRecord> {
    const { source, root } = record
    this.writeRecord(record)
    const gitDir = this.gitDirOf(record)
    try {
      // Everything but a repository's own metadata: a copy is tracked by dsh's git directory, outside it.
      cpSync(source, root, { recursive: true, verbatimSymlinks: true, errorOnExist: true, force: false, filter: (path) => basename(path) !== '.git' || path === source })
      mkdirSync(gitDir, { recursive: true })
      await git(root, ['init', '--quiet', `--separate-git-dir=${gitDir}`], 'tracking the copy')
      // `init --separate-git-dir` leaves a `.git` file pointing at it: the child must not find one.
      rmSync(join(root, '.git'), { force: true })
      await git(root, [...gitArgs(record, gitDir), 'add', '--all', '--force'], 'recording the copy')
      await gitCommit(root, gitArgs(record, gitDir), ['commit', '--quiet', '--allow-empty', '--no-verify', '-m', 'dsh: the copy as it was made'], 'recording the copy')
      record.base = (await git(root, [...gitArgs(record, gitDir), 'rev-parse', 'HEAD'], 'recording the copy')).trim()
      this.writeRecord(record)
      return record
    } catch (error) {
      rmSync(root, { recursive: true, force: true })
      rmSync(gitDir, { recursive: true, force: true })
      this.removeRecord(record)
      throw error instanceof WorkspaceError ? error : new WorkspaceError('INVALID', `${source} could not be copied for the child: ${errorMessage(error)}`)
    }
  }

  /**
   * Name the workspace made under `from` (before its child existed) by its child's id,
   * `to`; `persistent`: it outlives this process (a continuable child's), so it is never
   * taken for an orphan.
   */
  rename(from: string, to: string, options: { persistent?: boolean } = {}): void {
    const record = this.mine.get(from)
    if (record === undefined) throw new WorkspaceError('NOT_FOUND', `no workspace was made under ${from}`)
    this.mine.delete(from)
    record.childId = to
    if (options.persistent) record.state = 'kept'
    this.mine.set(to, record)
    this.writeRecord(record)
  }

  /** What child `childId` changed in its workspace so far. */
  async changes(childId: string): Promise<WorkspaceChanges> {
    const record = this.recordOf(childId)
    return readChanges(record, record.mode === 'copy' ? this.gitDirOf(record) : undefined)
  }

  /**
   * The child is done: a workspace with no changes is removed (`undefined`), one with
   * changes is kept for its parent to merge or discard (its changes).
   */
  async release(childId: string): Promise<WorkspaceChanges | undefined> {
    const record = this.mine.get(childId)
    if (record === undefined) return undefined
    const changes = await this.changes(childId).catch(() => undefined)
    // Unchanged, it goes, unless workspaces made from it still need its directory.
    if (changes !== undefined && changes.files.length === 0 && !changes.committed && !changes.missing && this.dependents(record).length === 0) {
      await this.discard(childId)
      return undefined
    }
    record.state = 'kept'
    this.writeRecord(record)
    return changes
  }

  /**
   * Bring child `childId`'s changes into the directory it came from: a worktree's branch is
   * merged (what it left uncommitted is committed on it first; the parent's tree must have
   * no uncommitted changes to tracked files); a copy's changed files are written back, none
   * of them if any was changed in the parent meanwhile. Conflicts change nothing and are
   * listed. On success the workspace is removed.
   */
  async merge(childId: string): Promise<MergeOutcome> {
    const record = this.recordOf(childId)
    return this.serial(lockOf(record), () => {
      this.assertStill(record)
      this.refuseIfHeld(record, 'merge')
      const discard = (merged: WorkspaceRecord) => this.discardNow(merged)
      return record.mode === 'worktree' ? mergeWorktree(record, this.dir, discard) : mergeCopy(record, this.gitDirOf(record), discard)
    })
  }

  /** Throw child `childId`'s workspace away: its directory, its branch and its record. */
  async discard(childId: string): Promise<void> {
    const record = this.recordOf(childId)
    await this.serial(lockOf(record), () => {
      this.assertStill(record)
      this.refuseIfHeld(record, 'discard')
      return this.discardNow(record)
    })
  }

  private async discardNow(record: WorkspaceRecord): Promise<void> {
    await removeWorkspace(record, this.gitDirOf(record))
    this.removeRecord(record)
    this.mine.delete(record.childId)
  }

  /**
   * Every workspace recorded in `dir`, this process's and others', with whether it is an
   * orphan (its process is gone while it was live); a record dsh would never have written
   * is an orphan with the reason (`invalid`).
   */
  async list(): Promise<ListedWorkspace[]> {
    const listed: ListedWorkspace[] = []
    for (const record of readRecords(this.dir)) {
      if ('invalid' in record) listed.push(record)
      else listed.push({ ...record, orphaned: record.state === 'live' && record.pid !== process.pid && !(await alive(record.pid)) })
    }
    return listed
  }

  /**
   * Remove orphaned workspaces (and with `all`, every one recorded), each with its branch;
   * says what it removed. One that workspaces still in use were made from stays (with
   * `all`, those made from it go first). Of an invalid record only the record file goes:
   * nothing it names is touched. `only` (with `all`): of the workspaces that are not
   * orphaned, those with these ids alone, so one made after a person was shown the list
   * and agreed is not removed with the rest.
   */
  async clean(options: { all?: boolean; only?: ReadonlySet<string> } = {}): Promise<ListedWorkspace[]> {
    const removed: ListedWorkspace[] = []
    const listed = await this.list()
    for (const entry of listed) {
      if (entry.invalid === undefined) continue
      rmSync(entry.file, { force: true })
      removed.push(entry)
    }
    const valid = listed.filter((entry): entry is Exclude<ListedWorkspace, { invalid: string }> => entry.invalid === undefined)
    const byId = new Map(valid.map((entry) => [entry.id, entry]))
    const depth = (entry: WorkspaceRecord) => {
      const seen = new Set<string>()
      for (let at: WorkspaceRecord | undefined = entry; at?.derivedFrom !== undefined && !seen.has(at.id); at = byId.get(at.derivedFrom)) seen.add(at.id)
      return seen.size
    }
    // Those made from others first, so what they were made from is free to go after them.
    for (const record of valid.sort((a, b) => depth(b) - depth(a))) {
      if (!record.orphaned && (!options.all || (options.only !== undefined && !options.only.has(record.id)))) continue
      const gone = await this.serial(lockOf(record), async () => {
        if (!existsSync(this.recordFile(record)) || this.dependents(record).length > 0) return false
        await this.discardNow(record)
        return true
      })
      if (gone) removed.push(record)
    }
    return removed
  }

  /** This process's record of `childId`'s workspace, or the `NOT_FOUND` error. */
  private recordOf(childId: string): WorkspaceRecord {
    const record = this.mine.get(childId) ?? validRecords(this.dir).find((candidate) => candidate.childId === childId)
    if (!record) throw notFound(childId)
    this.mine.set(childId, record)
    return record
  }

  /** After waiting for its turn: `record` is still there (a merge or discard just before may have removed it). */
  private assertStill(record: WorkspaceRecord): void {
    if (!existsSync(this.recordFile(record))) {
      if (this.mine.get(record.childId) === record) this.mine.delete(record.childId)
      throw notFound(record.childId)
    }
  }

  /** The workspace whose directory holds `path` (one made from it is derived from it). */
  private workspaceHolding(path: string): WorkspaceRecord | undefined {
    return validRecords(this.dir).find((record) => inside(path, record.root) || inside(path, realOrSame(record.root)))
  }

  /** The workspaces made (or being made) from `record`'s directory, named for a person. */
  private dependents(record: WorkspaceRecord): string[] {
    const made = validRecords(this.dir).filter((other) => other.derivedFrom === record.id && other.id !== record.id)
    const making = [...this.creating].filter(([, making]) => inside(making.source, record.root))
    return [...made.map((other) => `subagent ${other.childId}'s ${other.mode}, ${other.state}`), ...making.map(([childId]) => `subagent ${childId}'s, being made`)]
  }

  /** A workspace others were made from and still use is not removed: they need its directory (and, worktrees, its branch to merge into). */
  private refuseIfHeld(record: WorkspaceRecord, what: 'merge' | 'discard'): void {
    const dependents = this.dependents(record)
    if (dependents.length === 0) return
    throw new WorkspaceError('IN_USE', `subagent ${record.childId}'s workspace cannot be ${what === 'merge' ? 'merged (which removes it)' : 'discarded'} yet: ${dependents.length === 1 ? 'a workspace was' : `${dependents.length} workspaces were`} made from it and ${dependents.length === 1 ? 'is' : 'are'} still in use (${dependents.join('; ')}); merge or discard ${dependents.length === 1 ? 'it' : 'them'} first`)
  }

  private recordFile(record: WorkspaceRecord): string {
    return join(this.dir, 'records', `${record.id}.json`)
  }

  private gitDirOf(record: WorkspaceRecord): string {
    return join(this.dir, 'gits', record.id)
  }

  private writeRecord(record: WorkspaceRecord): void {
    const file = join(this.dir, 'records', `${record.id}.json`)
    const partial = `${file}.${process.pid}.tmp`
    writeFileSync(partial, `${JSON.stringify(record, null, 2)}\n`, { mode: 0o600 })
    renameSync(partial, file)
  }

  private removeRecord(record: WorkspaceRecord): void {
    rmSync(this.recordFile(record), { force: true })
  }

  /** Run `work` alone among this process's operations on `place` (see `locks`). */
  private serial<T>(place: string, work: () => Promise<T>): Promise<T> {
    const before = this.locks.get(place) ?? Promise.resolve()
    const next = before.then(work, work)
    this.locks.set(
      place,
      next.catch(() => undefined),
    )
    return next
  }
}

/** Remove a workspace's directory (a worktree through git), its branch and a copy's git directory. */
async function removeWorkspace(record: WorkspaceRecord, copyGitDir: string): Promise<void> {
  if (record.mode === 'worktree') {
    // Through the repository's git directory recorded when the worktree was made, never
    // found again from the directory it was made from: that may be gone (a grandchild's
    // worktree made from its parent's). Records from before it was kept: the repository.
    const at = record.gitDir !== undefined ? [`--git-dir=${record.gitDir}`] : []
    const cwd = record.gitDir ?? record.repository
    if (cwd !== undefined && existsSync(cwd)) {
      if (existsSync(record.root)) await gitResult(cwd, [...at, 'worktree', 'remove', '--force', '--force', record.root])
      await gitResult(cwd, [...at, 'worktree', 'prune'])
      if (record.branch !== undefined) await gitResult(cwd, [...at, 'branch', '-D', '--', record.branch])
    }
  }
  // Only ever inside dsh's own workspaces directory (a record read from disk was checked to be).
  if (record.root.includes(`${sep}trees${sep}`)) rmSync(record.root, { recursive: true, force: true })
  rmSync(copyGitDir, { recursive: true, force: true })
}

/** The fields of a record both kinds share, known before it is made. */
type RecordFields = Omit<WorkspaceRecord, 'mode' | 'path' | 'base' | 'repository' | 'gitDir' | 'worktreeGitDir' | 'branch'>

/** The key `serial` runs a workspace's merge and removal under: its repository's git directory, or the directory copied. */
function lockOf(record: WorkspaceRecord): string {
  return record.mode === 'worktree' ? (record.gitDir ?? record.repository!) : record.source
}

function notFound(childId: string): WorkspaceError {
  return new WorkspaceError('NOT_FOUND', `subagent ${childId} has no workspace (it worked in the shared directory, or its workspace was merged or discarded already)`)
}

function realOrSame(path: string): string {
  try {
    return realpathSync(path)
  } catch {
    return path
  }
}

function alive(pid: number): Promise<boolean> {
  return processAlive(pid)
}

/** A label as a branch-name word: lower case letters, digits and dashes, at most 32. */
function slug(label: string | undefined): string {
  const word = (label ?? 'child').toLowerCase().replace(/[^a-z0-9]+/g, '-').replace(/^-+|-+$/g, '').slice(0, 32).replace(/-+$/, '')
  return word || 'child'
}

export namespace WorkspaceService {
  export interface Config {
    dir?: string
    maxLivePerTree: number
  }
}

export default WorkspaceService
