/**
 * `dsh workspaces discard` and `clean --all` on a terminal (tmux): what would be lost is
 * listed and asked about; no keeps everything, yes removes it.
 */
import { writeFileSync } from 'node:fs'
import { join } from 'node:path'
import { afterAll, afterEach, describe, expect, it } from 'vitest'
import { tmuxServer } from './tmux.js'
import { dshBin, tempDir } from './cli.js'
import { git, keptWorkspaces } from './workspaces-kept.js'

const session = `dsh-workspaces-tty-${process.pid}`
const { tmux, stop: stopTmux } = tmuxServer(session)
afterAll(stopTmux)
const screen = () => tmux('capture-pane', '-p', '-J', '-t', session)

/** The screen once `check` holds; gives up when the command has ended (its EXIT= line is drawn) without it. */
async function until(check: (text: string) => boolean): Promise<string> {
  for (;;) {
    const text = screen()
    if (check(text)) return text
    if (text.includes('EXIT=')) throw new Error(`the command ended without the screen matching; last screen:\n${text}`)
    await new Promise((resolve) => setTimeout(resolve, 50))
  }
}

/** Runs `dsh workspaces ARGS…` on a fresh terminal, then waits on until the session is killed. */
function start(home: string, args: string[]): void {
  const script = join(tempDir(), 'run.sh')
  writeFileSync(script, `env DSH_HOME='${home}' '${process.execPath}' '${dshBin}' workspaces ${args.map((arg) => `'${arg}'`).join(' ')}; echo EXIT=$?; sleep 60\n`)
  tmux('new-session', '-d', '-s', session, '-x', '200', '-y', '40', `sh '${script}'`)
}

afterEach(() => {
  try {
    tmux('kill-session', '-t', session)
  } catch {
    // already gone
  }
})

describe('dsh workspaces asks on a terminal before losing changes', () => {
  it('discard lists the changed files and asks; "n" keeps the workspace and its branch', async () => {
    const { repo, home, ids } = await keptWorkspaces([2])
    start(home, ['discard', ids[0]!])
    const asked = await until((text) => text.includes('discard them? [y/N]'))
    expect(asked).toMatch(/holds changes that discarding loses:\n {2}added new-2\.txt \(\+1 -0\)\n {2}modified notes\.txt \(\+1 -1\)\n/)
    tmux('send-keys', '-t', session, 'n', 'Enter')
    const done = await until((text) => text.includes('EXIT='))
    expect(done).toContain('nothing was discarded')
    expect(done).toContain('EXIT=1')
    expect(git(repo, 'branch', '--list', 'dsh/*')).not.toBe('')
  })

  it('clean --all lists every workspace it would remove with what it holds, and "y" removes them', async () => {
    const { repo, home, ids } = await keptWorkspaces([2, 5])
    start(home, ['clean', '--all'])
    const asked = await until((text) => text.includes('remove them? [y/N]'))
    expect(asked).toContain('clean --all removes 2 workspaces that are not orphaned, and what they hold:')
    for (const id of ids) expect(asked).toContain(`${id}  worktree dsh/line-`)
    expect(asked.match(/kept \(changes to merge or discard\): 2 files changed, 2 insertions\(\+\), 1 deletion\(-\)/g)).toHaveLength(2)
    tmux('send-keys', '-t', session, 'y', 'Enter')
    const done = await until((text) => text.includes('EXIT='))
    expect(done).toContain('2 workspaces removed')
    expect(done).toContain('EXIT=0')
    expect(git(repo, 'branch', '--list', 'dsh/*')).toBe('')
  })
})
