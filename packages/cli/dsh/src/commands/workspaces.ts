/**
 * `dsh workspaces list | clean [--all]`: the workspaces children were given, as their
 * records on disk say (`@dsh/workspaces`), this process's or any other's, those a killed
 * run left behind (orphaned) included.
 */
import { Context } from 'cordis'
import { printable } from '@dsh/base'
import { WorkspaceService } from '@dsh/workspaces'
import { UsageError } from '../errors.js'

export async function workspacesCommand(verb: string | undefined, args: readonly string[], options: { all: boolean; yes?: boolean; dir?: string }): Promise<number> {
  if (verb !== 'list' && verb !== 'clean') throw new UsageError('USAGE', 'dsh workspaces: the verbs are `list` and `clean [--all]` (dsh workspaces --help)')
  if (args.length > 0) throw new UsageError('USAGE', `dsh workspaces ${verb}: unexpected argument ${JSON.stringify(args[0])}`)
  if (verb === 'list' && options.all) throw new UsageError('USAGE', 'dsh workspaces list: --all belongs to clean')
  const ctx = new Context()
  await ctx.plugin(WorkspaceService, { maxLivePerTree: 8, ...(options.dir !== undefined && { dir: options.dir }) })
  try {
    if (verb === 'list') {
      const listed = await ctx.workspaces.list()
      if (listed.length === 0) {
        process.stdout.write(`no workspaces (${ctx.workspaces.dir})\n`)
        return 0
      }
      for (const record of listed) {
        if (record.invalid !== undefined) {
          process.stdout.write(printable(`${record.id}  invalid record ${record.file}: ${record.invalid}  orphaned (clean removes the record alone)\n`))
          continue
        }
        const state = record.orphaned ? 'orphaned (its run ended without cleaning up)' : record.state === 'kept' ? 'kept (changes to merge or discard)' : `in use by process ${record.pid}`
        const what = record.mode === 'worktree' ? `worktree ${record.branch} of ${record.repository}` : `copy of ${record.source}`
        process.stdout.write(printable(`${record.childId}  ${what}  ${record.root}  ${state}\n`))
      }
      return 0
    }
    const removed = await ctx.workspaces.clean({ all: options.all })
    for (const record of removed) process.stdout.write(printable(record.invalid !== undefined ? `removed the invalid record ${record.file} (${record.invalid}); nothing it names was touched\n` : `removed ${record.root}${record.branch ? ` and branch ${record.branch}` : ''} (subagent ${record.childId})\n`))
    process.stdout.write(`${removed.length} ${removed.length === 1 ? 'workspace' : 'workspaces'} removed${options.all ? '' : ' (orphaned ones; --all removes every one, changes included)'}\n`)
    return 0
  } finally {
    await ctx.fiber.dispose()
  }
}
