/**
 * `dsh workspaces list | merge ID | discard ID | clean [--all]`: the workspaces children
 * were given, as their records on disk say (`@dsh/workspaces`), this process's or any
 * other's, those a killed run left behind (orphaned) included. `merge` and `discard` settle
 * a kept one by the child id `list` shows, through the service's own merge and discard (the
 * same the model's `workspace` tool uses), so a person brings back exactly what the parent
 * would have. What would throw changes away (`discard` of a workspace that holds some,
 * `clean --all`) is asked on a terminal, and needs `--yes` anywhere else.
 */
import { Context } from 'cordis'
import { errorMessage, printable } from '@dsh/base'
import { WorkspaceService, type ListedWorkspace, type WorkspaceChanges } from '@dsh/workspaces'
import { UsageError } from '../errors.js'
import { confirmOnTerminal, promptTerminal } from './workspaces-confirm.js'

type Verb = 'list' | 'merge' | 'discard' | 'clean'
const VERBS: readonly Verb[] = ['list', 'merge', 'discard', 'clean']
type Valid = Exclude<ListedWorkspace, { invalid: string }>

export interface WorkspacesOptions {
  all: boolean
  yes?: boolean
  dir?: string
}

export async function workspacesCommand(verb: string | undefined, args: readonly string[], options: WorkspacesOptions): Promise<number> {
  if (!VERBS.includes(verb as Verb)) throw new UsageError('USAGE', 'dsh workspaces: the verbs are `list`, `merge ID`, `discard ID` and `clean [--all]` (dsh workspaces --help)')
  const wantsId = verb === 'merge' || verb === 'discard'
  if (wantsId && args.length === 0) throw new UsageError('USAGE', `dsh workspaces ${verb}: which workspace? Name it by the id dsh workspaces list shows first on its line`)
  if (args.length > (wantsId ? 1 : 0)) throw new UsageError('USAGE', `dsh workspaces ${verb}: unexpected argument ${JSON.stringify(args[wantsId ? 1 : 0])}`)
  if (verb !== 'clean' && options.all) throw new UsageError('USAGE', `dsh workspaces ${verb}: --all belongs to clean`)
  if ((verb === 'list' || verb === 'merge') && options.yes) throw new UsageError('USAGE', `dsh workspaces ${verb}: --yes belongs to discard and clean --all`)
  const ctx = new Context()
  await ctx.plugin(WorkspaceService, { maxLivePerTree: 8, ...(options.dir !== undefined && { dir: options.dir }) })
  try {
    switch (verb as Verb) {
      case 'list':
        return await list(ctx.workspaces)
      case 'merge':
        return await merge(ctx.workspaces, args[0]!)
      case 'discard':
        return await discard(ctx.workspaces, args[0]!, options.yes === true)
      case 'clean':
        return await clean(ctx.workspaces, options)
    }
  } finally {
    await ctx.fiber.dispose()
  }
}

async function list(workspaces: WorkspaceService): Promise<number> {
  const listed = await workspaces.list()
  if (listed.length === 0) {
    process.stdout.write(`no workspaces (${workspaces.dir})\n`)
    return 0
  }
  for (const record of listed) {
    if (record.invalid !== undefined) {
      process.stdout.write(printable(`${record.id}  invalid record ${record.file}: ${record.invalid}  orphaned (clean removes the record alone)\n`))
      continue
    }
    process.stdout.write(printable(`${record.childId}  ${describe(record)}  ${record.root}  ${stateOf(record)}\n`))
  }
  return 0
}

/** Bring a kept workspace back through the service's merge: committed and uncommitted changes alike; a conflict changes nothing. */
async function merge(workspaces: WorkspaceService, id: string): Promise<number> {
  const record = await findSettleable(workspaces, 'merge', id)
  let outcome
  try {
    outcome = await workspaces.merge(record.childId)
  } catch (error) {
    throw new UsageError('USAGE', `dsh workspaces merge ${id}: ${errorMessage(error)}`, { cause: error })
  }
  if (outcome.ok) {
    process.stdout.write(printable(`${outcome.summary}${outcome.commit ? ` (commit ${outcome.commit.slice(0, 12)})` : ''} into ${record.source}\n`))
    return 0
  }
  process.stdout.write(printable(`${outcome.summary}\nconflicting files:\n${outcome.conflicts.map((file) => `  ${file}\n`).join('')}`))
  return 1
}

/** Throw a workspace away; one that holds changes only when the person agrees (a terminal) or said so (`--yes`). */
async function discard(workspaces: WorkspaceService, id: string, yes: boolean): Promise<number> {
  const record = await findSettleable(workspaces, 'discard', id)
  const changes = await workspaces.changes(record.childId)
  if (holdsChanges(changes) && !yes) {
    const terminal = promptTerminal()
    if (terminal === undefined) throw new UsageError('USAGE', `dsh workspaces discard ${id}: its ${describe(record)} holds changes (${changes.diffstat}${changes.committed ? ', committed' : ''}); pass --yes to throw them away`)
    terminal.output.write(printable(`subagent ${record.childId}'s ${describe(record)} holds changes that discarding loses:\n${changedLines(changes)}`))
    if (!(await confirmOnTerminal(terminal, 'discard them? [y/N] '))) {
      process.stdout.write('nothing was discarded\n')
      return 1
    }
  }
  try {
    await workspaces.discard(record.childId)
  } catch (error) {
    throw new UsageError('USAGE', `dsh workspaces discard ${id}: ${errorMessage(error)}`, { cause: error })
  }
  process.stdout.write(printable(`discarded ${record.root}${record.branch ? ` and branch ${record.branch}` : ''} (subagent ${record.childId})\n`))
  return 0
}

/**
 * Remove orphaned workspaces; with `--all` every one, which loses what those that are not
 * orphaned hold (kept changes, a running child's directory): those are listed and asked
 * about on a terminal, refused without `--yes` anywhere else.
 */
async function clean(workspaces: WorkspaceService, options: WorkspacesOptions): Promise<number> {
  let only: ReadonlySet<string> | undefined
  if (options.all) {
    const beyond = (await workspaces.list()).filter((entry): entry is Valid => entry.invalid === undefined && !entry.orphaned)
    if (beyond.length > 0 && options.yes !== true) {
      const losses = await Promise.all(beyond.map(async (record) => ({ record, changes: await workspaces.changes(record.childId).catch(() => undefined) })))
      const holding = losses.filter(({ changes }) => changes === undefined || holdsChanges(changes)).length
      const terminal = promptTerminal()
      if (terminal === undefined) {
        throw new UsageError('USAGE', `dsh workspaces clean --all would remove ${count(beyond.length, 'workspace')} that ${beyond.length === 1 ? 'is' : 'are'} not orphaned (${holding} holding changes); pass --yes to remove them, or leave out --all to remove only the orphaned ones`)
      }
      terminal.output.write(printable(`clean --all removes ${count(beyond.length, 'workspace')} that ${beyond.length === 1 ? 'is' : 'are'} not orphaned, and what ${beyond.length === 1 ? 'it holds' : 'they hold'}:\n${losses.map(({ record, changes }) => `  ${record.childId}  ${describe(record)}  ${stateOf(record)}: ${changes === undefined ? 'its changes cannot be read' : changes.diffstat}\n${changes === undefined ? '' : changedLines(changes, '    ')}`).join('')}`))
      if (!(await confirmOnTerminal(terminal, 'remove them? [y/N] '))) {
        process.stdout.write('nothing was removed\n')
        return 1
      }
    }
    // What was shown (or, with --yes, what was there now) and nothing made since.
    only = new Set(beyond.map((record) => record.id))
  }
  const removed = await workspaces.clean({ all: options.all, ...(only !== undefined && { only }) })
  for (const record of removed) process.stdout.write(printable(record.invalid !== undefined ? `removed the invalid record ${record.file} (${record.invalid}); nothing it names was touched\n` : `removed ${record.root}${record.branch ? ` and branch ${record.branch}` : ''} (subagent ${record.childId})\n`))
  process.stdout.write(`${count(removed.length, 'workspace')} removed${options.all ? '' : ' (orphaned ones; --all removes every one, changes included)'}\n`)
  return 0
}

/**
 * The workspace `id` names (its child's id, as `list` shows it), when a person may settle
 * it: not one a running dsh is still using (its child works in it), and not an invalid
 * record (nothing it names is acted on). Otherwise one line saying why.
 */
async function findSettleable(workspaces: WorkspaceService, verb: 'merge' | 'discard', id: string): Promise<Valid> {
  const listed = await workspaces.list()
  const record = listed.find((entry): entry is Valid => entry.invalid === undefined && entry.childId === id)
  if (record === undefined) {
    const invalid = listed.find((entry) => entry.invalid !== undefined && (entry.id === id || entry.childId === id))
    if (invalid?.invalid !== undefined) throw new UsageError('USAGE', printable(`dsh workspaces ${verb} ${id}: its record ${invalid.file} is not one dsh wrote (${invalid.invalid}), so nothing it names is acted on; dsh workspaces clean removes the record`))
    throw new UsageError('USAGE', printable(`dsh workspaces ${verb}: no workspace ${JSON.stringify(id)} in ${workspaces.dir} (dsh workspaces list shows each one's id first on its line)`))
  }
  if (record.state === 'live' && !record.orphaned && record.pid !== process.pid) {
    throw new UsageError('USAGE', printable(`dsh workspaces ${verb} ${id}: it is in use by process ${record.pid} (its child is still working in it); ${verb} it once that run has ended`))
  }
  return record
}

/** Whether discarding loses something: a file changed, or a commit of the child's own. */
function holdsChanges(changes: WorkspaceChanges): boolean {
  return !changes.missing && (changes.files.length > 0 || changes.committed)
}

function changedLines(changes: WorkspaceChanges, indent = '  '): string {
  const shown = changes.files.slice(0, 20).map((file) => `${indent}${file.status} ${file.path}${file.added !== undefined ? ` (+${file.added} -${file.removed ?? 0})` : ''}\n`)
  return `${shown.join('')}${changes.files.length > 20 ? `${indent}… and ${changes.files.length - 20} more\n` : ''}`
}

function describe(record: Valid): string {
  return record.mode === 'worktree' ? `worktree ${record.branch} of ${record.repository}` : `copy of ${record.source}`
}

function stateOf(record: Valid): string {
  return record.orphaned ? 'orphaned (its run ended without cleaning up)' : record.state === 'kept' ? 'kept (changes to merge or discard)' : `in use by process ${record.pid}`
}

function count(n: number, noun: string): string {
  return `${n} ${noun}${n === 1 ? '' : 's'}`
}
