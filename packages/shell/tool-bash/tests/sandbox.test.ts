/**
 * The bash tool confines commands under the real bubblewrap: for an agent whose session
 * header has `sandbox` (a delegation that asked for one), whatever the instance says, and
 * for every agent of an instance configured with `sandbox`. These tests need `bwrap`
 * (npm test's preflight installs it) and fail, never skip, without it.
 */
import { execFileSync } from 'node:child_process'
import { existsSync, readFileSync, writeFileSync } from 'node:fs'
import { mkdtemp, rm } from 'node:fs/promises'
import { createServer, type AddressInfo, type Server } from 'node:net'
import { tmpdir } from 'node:os'
import { join } from 'node:path'
import { afterEach, beforeAll, describe, expect, it } from 'vitest'
import { createHarness, type Harness, type HarnessOptions } from '@dsh/testkit/harness'
import type { Agent } from '@dsh/agent'
import { BashService, sandboxProblem, type BashExecutor } from '@dsh/bash'
import { textOf } from '@dsh/llm'
import type { SandboxSpec } from '@dsh/session'
import { TaskService } from '@dsh/tasks'
import { TaskToolsPlugin } from '@dsh/tool-tasks'
import { BashToolPlugin, type BashToolConfig } from '@dsh/tool-bash'

let harness: Harness | undefined
let server: Server | undefined
const made: string[] = []

afterEach(async () => {
  await harness?.dispose()
  harness = undefined
  await new Promise((resolve) => (server ? server.close(resolve) : resolve(undefined)))
  server = undefined
  await Promise.all(made.splice(0).map((path) => rm(path, { recursive: true, force: true })))
})

beforeAll(() => {
  expect(sandboxProblem(), 'these tests run commands under bubblewrap: npm test\'s preflight (scripts/preflight.mjs) installs it').toBeUndefined()
})

async function tempDir(parent = tmpdir()): Promise<string> {
  const dir = await mkdtemp(join(parent, 'dsh-tool-sandbox-'))
  made.push(dir)
  return dir
}

async function setup(script: HarnessOptions['script'], tool: Partial<BashToolConfig> = {}) {
  harness = await createHarness({ script })
  await harness.plugin(BashService)
  await harness.plugin(TaskService)
  await harness.plugin(TaskToolsPlugin)
  await harness.plugin(BashToolPlugin, tool)
  return harness
}

/** An agent working in a directory of its own, with `sandbox` in its session header when given. */
async function agentIn(sandbox?: SandboxSpec): Promise<{ agent: Agent; dir: string }> {
  const dir = await tempDir()
  const agent = await harness!.agent({ meta: { cwd: dir, ...(sandbox && { sandbox }) } })
  return { agent, dir }
}

function results(agent: Agent) {
  return agent.session.events().flatMap((event) => (event.type === 'tool/result' ? [{ text: textOf(event.result.content), isError: event.result.isError === true }] : []))
}

/** A server on the host's 127.0.0.1 that counts connections; the command to reach it with bash's /dev/tcp. */
async function hostServer(): Promise<{ command: string; connections: () => number }> {
  let connections = 0
  server = createServer((socket) => {
    connections++
    socket.end('hello from the host\n')
  })
  await new Promise<void>((resolve) => server!.listen(0, '127.0.0.1', resolve))
  const { port } = server.address() as AddressInfo
  return { command: `exec 3<>/dev/tcp/127.0.0.1/${port} && echo connected && cat <&3`, connections: () => connections }
}

const calls = (...commands: string[]) => [{ reply: [...commands.map((command) => ({ call: { tool: 'bash', args: { command } } })), { text: 'done' }] }]

describe('an agent whose session header has a sandbox', () => {
  it('writes only in its working directory, cannot reach the network, and is told so in its prompt', async () => {
    const outside = await tempDir('/var/tmp')
    const host = await hostServer()
    await setup(calls('echo inside > inside.txt && echo wrote-inside', `echo outside > ${outside}/escaped.txt`, host.command))
    const { agent, dir } = await agentIn({ network: false })
    await agent.followup('go')
    const [inside, escaped, network] = results(agent)
    expect(inside).toEqual({ isError: false, text: 'exit code 0\nwrote-inside\n' })
    expect(readFileSync(join(dir, 'inside.txt'), 'utf8')).toBe('inside\n')
    // The refused write is the command's own failure, in its own words.
    expect(escaped.isError).toBe(true)
    expect(escaped.text).toMatch(/^exit code 1\n.*escaped\.txt: Read-only file system\n$/)
    expect(existsSync(join(outside, 'escaped.txt'))).toBe(false)
    expect(network.isError).toBe(true)
    expect(network.text).not.toContain('connected')
    expect(host.connections()).toBe(0)
    expect(harness!.ctx.agents.systemPrompt(agent)).toContain('Commands run in a sandbox: only the working directory is writable (and a private /tmp, emptied after each command); the rest of the file system is read-only, and there is no network.')
  })

  it('with network: true reaches the network, still confined to its directory', async () => {
    const outside = await tempDir('/var/tmp')
    const host = await hostServer()
    await setup(calls(host.command, `touch ${outside}/escaped`))
    const { agent } = await agentIn({ network: true })
    await agent.followup('go')
    const [network, escaped] = results(agent)
    expect(network).toEqual({ isError: false, text: 'exit code 0\nconnected\nhello from the host\n' })
    expect(host.connections()).toBe(1)
    expect(escaped.text).toContain('Read-only file system')
    expect(existsSync(join(outside, 'escaped'))).toBe(false)
    expect(harness!.ctx.agents.systemPrompt(agent)).toMatch(/Commands run in a sandbox: .* the rest of the file system is read-only\.$/m)
  })

  it('is confined even by an instance configured unconfined, while an agent without one is not', async () => {
    const outside = await tempDir('/var/tmp')
    await setup(calls(`touch ${outside}/escaped && echo escaped`), { sandbox: false })
    const confined = await agentIn({ network: false })
    await confined.agent.followup('go')
    expect(results(confined.agent)[0].text).toContain('Read-only file system')
    expect(existsSync(join(outside, 'escaped'))).toBe(false)
    const free = await agentIn()
    await free.agent.followup('go')
    expect(results(free.agent)[0]).toEqual({ isError: false, text: 'exit code 0\nescaped\n' })
    expect(existsSync(join(outside, 'escaped'))).toBe(true)
    expect(harness!.ctx.agents.systemPrompt(free.agent)).not.toContain('Commands run in a sandbox')
  })

  it('a background command is confined too', async () => {
    const outside = await tempDir('/var/tmp')
    await setup([
      {
        reply: [
          { call: { tool: 'bash', args: { command: `echo bg > bg.txt; touch ${outside}/escaped`, run_in_background: true } } },
          { call: { tool: 'task_output', args: { task_id: 'bash-1', wait: true, timeout_ms: 10_000 } } },
          { text: 'done' },
        ],
      },
    ])
    const { agent, dir } = await agentIn({ network: false })
    await agent.followup('go')
    const [, output] = results(agent)
    expect(output.text).toMatch(/^bash-1 failed: exit code 1 .*\ntouch: cannot touch '.*escaped': Read-only file system\n$/)
    expect(readFileSync(join(dir, 'bg.txt'), 'utf8')).toBe('bg\n')
    expect(existsSync(join(outside, 'escaped'))).toBe(false)
  })

  it('in a git worktree under /tmp, git reads the repository\'s git directory but cannot write to it (no hook or ref planted)', async () => {
    const repo = await tempDir()
    const git = (cwd: string, ...args: string[]) => execFileSync('git', ['-c', 'user.email=test@dsh', '-c', 'user.name=test', ...args], { cwd, encoding: 'utf8' })
    git(repo, 'init', '-q')
    writeFileSync(join(repo, 'file.txt'), 'one\n')
    git(repo, 'add', 'file.txt')
    git(repo, 'commit', '-q', '-m', 'first')
    const worktree = join(await tempDir(), 'child')
    git(repo, 'worktree', 'add', '-q', '-b', 'child', worktree)
    const planted = join(repo, '.git/hooks/post-merge')
    await setup(calls('echo two >> file.txt && git status --short', 'git add file.txt', `printf '#!/bin/sh\\ntouch /tmp/escaped\\n' > ${planted}`, `echo 0000000000000000000000000000000000000000 > ${repo}/.git/refs/heads/child`))
    const gitDir = join(repo, '.git')
    const agent = await harness!.agent({ meta: { cwd: worktree, sandbox: { network: false }, workspace: { mode: 'worktree', path: worktree, source: repo, branch: 'child', gitDir } } })
    await agent.followup('go')
    const [status, add, hook, ref] = results(agent)
    expect(status).toEqual({ isError: false, text: 'exit code 0\n M file.txt\n' })
    expect(add.isError).toBe(true)
    expect(add.text).toContain('index.lock\': Read-only file system')
    expect(hook.text).toContain('Read-only file system')
    expect(ref.text).toContain('Read-only file system')
    expect(existsSync(join(gitDir, 'hooks/post-merge'))).toBe(false)
    expect(git(repo, 'rev-parse', 'HEAD')).toBe(git(repo, 'rev-parse', 'child'))
    expect(git(repo, 'status', '--short')).toBe('')
  })

  it('a command the sandbox refuses to set up is reported as refused, not as the command failing', async () => {
    await setup(calls('echo ran'))
    const dir = join(await tempDir(), 'deleted-workspace')
    const agent = await harness!.agent({ meta: { cwd: dir, sandbox: { network: false } } })
    await agent.followup('go')
    expect(results(agent)).toEqual([
      { isError: true, text: `the command could not be started: the sandbox refused to run it: bwrap: Can't find source path ${dir}: No such file or directory` },
    ])
  })

  it('where the executor cannot confine commands, its calls fail and run nothing', async () => {
    harness = await createHarness({ script: calls('touch ran') })
    await harness.plugin(BashService, { executor: 'none' })
    let started = 0
    const unconfinable: BashExecutor = { name: 'remote', start: () => { started++; throw new Error('not reached') } }
    harness.ctx.bash.registerExecutor(unconfinable)
    await harness.plugin(BashToolPlugin)
    const { agent } = await agentIn({ network: false })
    await agent.followup('go')
    expect(results(agent)).toEqual([{ isError: true, text: 'bash failed: the bash executor "remote" cannot run sandboxed commands' }])
    expect(started).toBe(0)
  })
})

describe('an instance configured with sandbox', () => {
  it('"no-network" confines every agent\'s commands, without network', async () => {
    const outside = await tempDir('/var/tmp')
    const host = await hostServer()
    await setup(calls(`touch ${outside}/escaped`, host.command, 'echo inside > inside.txt'), { sandbox: 'no-network' })
    const { agent, dir } = await agentIn()
    await agent.followup('go')
    const [escaped, network, inside] = results(agent)
    expect(escaped.text).toContain('Read-only file system')
    expect(existsSync(join(outside, 'escaped'))).toBe(false)
    expect(network.text).not.toContain('connected')
    expect(host.connections()).toBe(0)
    expect(inside.isError).toBe(false)
    expect(readFileSync(join(dir, 'inside.txt'), 'utf8')).toBe('inside\n')
  })

  it('true confines with the network on; a header that turns it off wins (a confinement only narrows)', async () => {
    const host = await hostServer()
    await setup(calls(host.command), { sandbox: true })
    const open = await agentIn()
    await open.agent.followup('go')
    expect(results(open.agent)[0].text).toBe('exit code 0\nconnected\nhello from the host\n')
    const closed = await agentIn({ network: false })
    await closed.agent.followup('go')
    expect(results(closed.agent)[0].text).not.toContain('connected')
    expect(host.connections()).toBe(1)
  })

  it('"no-network" wins over a header that allows the network', async () => {
    const host = await hostServer()
    await setup(calls(host.command), { sandbox: 'no-network' })
    const { agent } = await agentIn({ network: true })
    await agent.followup('go')
    expect(results(agent)[0].text).not.toContain('connected')
    expect(host.connections()).toBe(0)
  })

  it('fails to load where the executor cannot confine commands, saying why', async () => {
    harness = await createHarness()
    await harness.plugin(BashService, { executor: 'none' })
    harness.ctx.bash.registerExecutor({ name: 'remote', start: () => { throw new Error('not reached') } })
    const failure = await Promise.resolve(harness.plugin(BashToolPlugin, { sandbox: 'no-network' })).then(() => undefined, (error: unknown) => error)
    expect(failure).toMatchObject({ name: 'BashError', code: 'SANDBOX_UNAVAILABLE', message: '@dsh/tool-bash: sandbox: "no-network": the bash executor "remote" cannot run sandboxed commands' })
  })
})
