/**
 * `ctx.bash.addRouter`: a router sends the requests it picks to another executor (here a
 * second local executor, with a smaller output bound so its runs are told apart) and leaves
 * the rest to the registered one; the latest router that picks wins; a sandboxed request is
 * held to the chosen executor's own sandbox check; disposing a router stops its routing.
 */
import { mkdtemp, rm } from 'node:fs/promises'
import { tmpdir } from 'node:os'
import { join } from 'node:path'
import { afterEach, describe, expect, it } from 'vitest'
import { Context, type Fiber } from 'cordis'
import { BashError, BashService, LocalBashExecutor, type BashExecutor, type BashProcess, type BashRequest } from '@dsh/bash'

let fiber: Fiber | undefined
let dir: string | undefined
afterEach(async () => {
  await fiber?.dispose()
  fiber = undefined
  if (dir) await rm(dir, { recursive: true, force: true })
  dir = undefined
})

/** An executor that records what it was asked to run and runs it on this machine. */
function recording(name: string): BashExecutor & { ran: string[] } {
  const local = new LocalBashExecutor({ killGraceMs: 500, maxOutputChars: 1000 })
  const ran: string[] = []
  return { name, ran, start: (request: BashRequest): BashProcess => (ran.push(request.command), local.start(request)) }
}

describe('ctx.bash routers', () => {
  it('a router runs the requests it picks on its executor and leaves the rest to the registered one, until it is disposed', async () => {
    const ctx = new Context()
    fiber = await ctx.plugin(BashService, {} as BashService.Config)
    dir = await mkdtemp(join(tmpdir(), 'bash-router-'))
    const elsewhere = recording('elsewhere')
    const other = recording('other')
    const remove = ctx.bash.addRouter((request) => (request.agentId === 'routed' ? elsewhere : undefined))
    ctx.bash.addRouter((request) => (request.agentId === 'routed' && request.command.includes('latest') ? other : undefined))
    expect((await ctx.bash.run({ command: 'echo routed', cwd: dir, agentId: 'routed' })).output).toBe('routed\n')
    expect((await ctx.bash.run({ command: 'echo latest', cwd: dir, agentId: 'routed' })).output).toBe('latest\n')
    expect((await ctx.bash.run({ command: 'echo here', cwd: dir, agentId: 'another' })).output).toBe('here\n')
    expect((await ctx.bash.run({ command: 'echo nobody', cwd: dir })).output).toBe('nobody\n')
    expect(elsewhere.ran).toEqual(['echo routed'])
    expect(other.ran).toEqual(['echo latest'])
    remove()
    await ctx.bash.run({ command: 'echo again', cwd: dir, agentId: 'routed' })
    expect(elsewhere.ran).toEqual(['echo routed'])
  })

  it('a sandboxed request routed to an executor that cannot confine is refused, and nothing runs', async () => {
    const ctx = new Context()
    fiber = await ctx.plugin(BashService, {} as BashService.Config)
    dir = await mkdtemp(join(tmpdir(), 'bash-router-'))
    const elsewhere = recording('elsewhere')
    ctx.bash.addRouter(() => elsewhere)
    expect(() => ctx.bash.start({ command: 'touch x', cwd: dir!, sandbox: { writable: [dir!], network: false } })).toThrow(BashError)
    expect(() => ctx.bash.start({ command: 'touch x', cwd: dir!, sandbox: { writable: [dir!], network: false } })).toThrow('the bash executor "elsewhere" cannot run sandboxed commands')
    expect(elsewhere.ran).toEqual([])
  })
})
