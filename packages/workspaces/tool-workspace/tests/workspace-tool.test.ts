/**
 * The workspace tool against the real services (agents, tools, `ctx.workspaces` on real
 * git repositories): who may act on a child's workspace. Only the agent that started the
 * child and that agent's ancestors may merge, discard or read it: not a sibling, not the
 * child's own subagents, not an agent of another tree.
 */
import { execFileSync } from 'node:child_process'
import { existsSync, mkdirSync, mkdtempSync, readFileSync, rmSync, writeFileSync } from 'node:fs'
import { tmpdir } from 'node:os'
import { join } from 'node:path'
import { afterEach, describe, expect, it } from 'vitest'
import type { Agent } from '@dsh/agent'
import { createHarness, type Harness } from '@dsh/testkit/harness'
import { WorkspaceService } from '@dsh/workspaces'
import WorkspaceToolPlugin from '@dsh/tool-workspace'

const made: string[] = []
let harness: Harness | undefined
afterEach(async () => {
  await harness?.dispose()
  harness = undefined
  for (const dir of made.splice(0)) rmSync(dir, { recursive: true, force: true })
})

const GIT_ENV = { ...process.env, GIT_AUTHOR_NAME: 'test', GIT_AUTHOR_EMAIL: 'test@localhost', GIT_COMMITTER_NAME: 'test', GIT_COMMITTER_EMAIL: 'test@localhost' }
const sh = (cwd: string, ...args: string[]) => execFileSync('git', args, { cwd, env: GIT_ENV, encoding: 'utf8' })

function temp(prefix: string): string {
  const dir = mkdtempSync(join(tmpdir(), prefix))
  made.push(dir)
  return dir
}

function repository(): string {
  const dir = join(temp('dsh-tool-ws-'), 'repo')
  mkdirSync(dir)
  sh(dir, 'init', '--quiet', '-b', 'main')
  writeFileSync(join(dir, 'notes.txt'), 'one\n')
  sh(dir, 'add', '.')
  sh(dir, 'commit', '--quiet', '-m', 'start')
  return dir
}

async function start(): Promise<Harness> {
  harness = await createHarness()
  await harness.plugin(WorkspaceService, { dir: temp('dsh-tool-ws-home-') })
  await harness.plugin(WorkspaceToolPlugin, {})
  return harness
}

async function call(h: Harness, agent: Agent, args: { action: string; subagent_id: string }) {
  const { result } = await h.ctx.tools.execute({ type: 'tool-call', id: 'call-ws', name: 'workspace', args }, { signal: new AbortController().signal, callId: 'call-ws', agent })
  return { isError: result.isError === true, text: result.content.map((block) => ('text' in block ? block.text : '')).join('') }
}

/** The workspace `parent`'s delegation to subagent `childId` would get, as `@dsh/subagent` asks for it. */
async function workspaceOf(h: Harness, parent: Agent, childId: string, source: string, label?: string) {
  const ancestorAgents: string[] = []
  for (let above = parent.parent; above !== undefined; above = above.parent) ancestorAgents.push(above.id)
  return h.ctx.workspaces.create({ mode: 'worktree', source, childId, ...(label !== undefined && { label }), tree: ancestorAgents.at(-1) ?? parent.id, parentAgent: parent.id, ancestorAgents })
}

describe('the workspace tool: who may act on a workspace', () => {
  it("only the agent that started the child and that agent's ancestors may read, merge or discard its workspace; a sibling, the child's own subagent and another tree's agent are refused", async () => {
    const h = await start()
    const repo = repository()
    const root = await h.agent()
    const middle = await h.agent({ parent: root })
    const sibling = await h.agent({ parent: root })
    const below = await h.agent({ parent: middle })
    const stranger = await h.agent()
    const { ref } = await workspaceOf(h, middle, 'leaf', repo, 'fixer')
    writeFileSync(join(ref.path, 'fix.txt'), 'fixed\n')

    for (const agent of [sibling, below, stranger]) {
      for (const action of ['changes', 'merge', 'discard']) {
        expect(await call(h, agent, { action, subagent_id: 'leaf' })).toEqual({ isError: true, text: expect.stringContaining('is not yours to act on') })
      }
      // By label, only the caller's own are looked among: to them it is not there at all.
      expect(await call(h, agent, { action: 'merge', subagent_id: 'fixer' })).toEqual({ isError: true, text: expect.stringContaining('has no workspace') })
    }
    expect(existsSync(ref.path)).toBe(true)
    expect(existsSync(join(repo, 'fix.txt'))).toBe(false)

    // The delegating agent reads it by its label, and its ancestor (the root) merges it by id.
    expect(await call(h, middle, { action: 'changes', subagent_id: 'fixer' })).toEqual({ isError: false, text: expect.stringContaining('added fix.txt') })
    expect(await call(h, root, { action: 'merge', subagent_id: 'leaf' })).toEqual({ isError: false, text: expect.stringMatching(/^merged dsh\/fixer-/) })
    expect(readFileSync(join(repo, 'fix.txt'), 'utf8')).toBe('fixed\n')
  })

  it('the agent that started the child discards it, and a label two of its workspaces share must be named by id', async () => {
    const h = await start()
    const repo = repository()
    const root = await h.agent()
    const other = await h.agent({ parent: root })
    const first = await workspaceOf(h, root, 'first', repo, 'twin')
    await workspaceOf(h, root, 'second', repo, 'twin')
    // Another agent's workspace with the same label is not the root's to count.
    await workspaceOf(h, other, 'third', repo, 'solo')
    expect(await call(h, root, { action: 'discard', subagent_id: 'twin' })).toEqual({ isError: true, text: expect.stringContaining('2 of your subagents\' workspaces have the label "twin" (first, second)') })
    expect(await call(h, root, { action: 'discard', subagent_id: 'first' })).toEqual({ isError: false, text: expect.stringContaining('discarded the workspace of subagent first and its branch dsh/twin-') })
    expect(existsSync(first.ref.path)).toBe(false)
    expect(await call(h, other, { action: 'discard', subagent_id: 'twin' })).toEqual({ isError: true, text: expect.stringContaining('has no workspace') })
    expect(await call(h, root, { action: 'discard', subagent_id: 'solo' })).toEqual({ isError: false, text: expect.stringContaining('discarded the workspace of subagent third') })
  })
})
