/**
 * The start pipeline's order (`src/start-pipeline.ts`), on real parts: spawn children, the
 * tree gate and worktree workspaces on a git repository the test makes. A child waits for
 * its slot before its workspace is made, so a queued child holds no worktree.
 */
import { execFileSync } from 'node:child_process'
import { mkdirSync, mkdtempSync, realpathSync, rmSync, writeFileSync } from 'node:fs'
import { tmpdir } from 'node:os'
import { join } from 'node:path'
import { afterEach, describe, expect, it } from 'vitest'
import { createHarness, gateTool, type Harness } from '@dsh/testkit/harness'
import { text } from '@dsh/llm'
import { NO_CAPABILITIES, SubagentService, type SubagentProvider, type SubagentRequest, type SubagentRun } from '@dsh/subagent'
import { SpawnPlugin } from '@dsh/subagent-spawn'
import { WorkspaceService } from '@dsh/workspaces'

const made: string[] = []
let harness: Harness | undefined
afterEach(async () => {
  await harness?.dispose()
  harness = undefined
  for (const dir of made.splice(0)) rmSync(dir, { recursive: true, force: true })
})

const GIT_ENV = { ...process.env, GIT_AUTHOR_NAME: 'test', GIT_AUTHOR_EMAIL: 'test@localhost', GIT_COMMITTER_NAME: 'test', GIT_COMMITTER_EMAIL: 'test@localhost' }
const git = (cwd: string, ...args: string[]) => execFileSync('git', args, { cwd, env: GIT_ENV, encoding: 'utf8' })

function temp(prefix: string): string {
  const dir = realpathSync(mkdtempSync(join(tmpdir(), prefix)))
  made.push(dir)
  return dir
}

/** A repository with one committed file. */
function repository(): string {
  const dir = join(temp('dsh-pipeline-'), 'repo')
  mkdirSync(dir)
  git(dir, 'init', '--quiet', '-b', 'main')
  writeFileSync(join(dir, 'notes.txt'), 'one line\n')
  git(dir, 'add', '.')
  git(dir, 'commit', '--quiet', '-m', 'start')
  return dir
}

/** The worktrees of `repo` other than its own, by path. */
function childWorktrees(repo: string): string[] {
  return git(repo, 'worktree', 'list', '--porcelain')
    .split('\n')
    .filter((line) => line.startsWith('worktree '))
    .map((line) => line.slice('worktree '.length))
    .filter((path) => path !== repo)
}

describe('the start pipeline', () => {
  it('a child queued behind a cap of 1 holds no worktree while it waits: its worktree is made once the first child has finished', async () => {
    const repo = repository()
    harness = await createHarness({
      script: [
        { when: { prompt: 'first' }, reply: [{ call: { tool: 'hold' } }, { text: 'first done' }] },
        { when: { prompt: 'second' }, reply: [{ text: 'second done' }] },
      ],
    })
    const hold = gateTool(harness, 'hold')
    await harness.plugin(WorkspaceService, { dir: temp('dsh-pipeline-home-') })
    await harness.plugin(SubagentService, { tree: { maxConcurrent: 1 } })
    await harness.plugin(SpawnPlugin, {})
    const parent = await harness.agent({ meta: { cwd: repo } })
    const ask = (prompt: string, onWait?: (waiting: boolean) => void): SubagentRequest => ({
      prompt: [text(prompt)],
      parent,
      signal: new AbortController().signal,
      workspace: 'worktree',
      ...(onWait && { onWait }),
    })

    const first = await harness.ctx.subagents.start('spawn', ask('first task'))
    await hold.entered
    const [firstWorktree] = childWorktrees(repo)
    expect(childWorktrees(repo)).toHaveLength(1)

    const waits: boolean[] = []
    let secondRun!: ReturnType<SubagentService['start']>
    const queued = new Promise<void>((resolve) => {
      secondRun = harness!.ctx.subagents.start(
        'spawn',
        ask('second task', (waiting) => {
          waits.push(waiting)
          if (waiting) resolve()
        }),
      )
    })
    await queued
    // Queued: the first child's worktree is the only one, in git and in ctx.workspaces.
    expect(childWorktrees(repo)).toEqual([firstWorktree])
    expect((await harness.ctx.workspaces.list()).map((record) => record.path)).toEqual([firstWorktree])

    hold.release()
    expect(await first.result).toMatchObject({ stopReason: 'completed' })
    const second = await secondRun
    expect(waits).toEqual([true, false])
    const secondResult = await second.result
    expect(secondResult).toMatchObject({ stopReason: 'completed', workspace: { kept: false } })
    // It ran in a worktree of its own, made after it left the queue.
    const secondWorktree = harness.ctx.agents.get(second.id)!.session.header.cwd
    expect(secondWorktree).not.toBe(firstWorktree)
    expect(childWorktrees(repo)).toContain(secondWorktree)
    await first.dispose()
    await second.dispose()
    expect(childWorktrees(repo)).toEqual([])
  })

  it("keeps the caller's request apart: the provider gets the caller's own object when nothing is added, else a copy with the additions, and the caller's is unchanged", async () => {
    harness = await createHarness()
    await harness.plugin(SubagentService, { tree: { maxConcurrent: 2 } })
    const seen: SubagentRequest[] = []
    const provider: SubagentProvider = {
      name: 'probe',
      capabilities: NO_CAPABILITIES,
      inheritsParentContext: false,
      start: (request) => {
        seen.push(request)
        const run: SubagentRun = { id: `probe-${seen.length}`, local: false, result: Promise.resolve({ output: [], stopReason: 'completed' }), cancel: () => {}, dispose: async () => {} }
        return Promise.resolve(run)
      },
    }
    harness.ctx.subagents.registerProvider(provider)
    const parent = await harness.agent()
    const plain: SubagentRequest = { prompt: [text('plain')], parent, signal: new AbortController().signal }
    await harness.ctx.subagents.start('probe', plain)
    expect(seen[0]).toBe(plain)

    const budget = { outputTokens: 100 }
    const limited: SubagentRequest = { prompt: [text('limited')], parent, signal: new AbortController().signal, budget }
    const before = { ...limited }
    await harness.ctx.subagents.start('probe', limited)
    const handed = seen[1]!
    expect(handed).not.toBe(limited)
    // The gate handed what the child may still use, and a sink that counts its usage reports.
    expect(handed.budget).toEqual({ outputTokens: 100 })
    expect(handed.progress).toBeDefined()
    expect(limited).toEqual(before)
    expect(limited.budget).toBe(budget)
    expect('progress' in limited).toBe(false)
  })
})
