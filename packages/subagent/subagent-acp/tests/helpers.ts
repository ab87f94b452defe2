import { readdirSync, readFileSync } from 'node:fs'
import { dirname, join, resolve } from 'node:path'
import { fileURLToPath } from 'node:url'
import { createHarness, type Harness } from '@dsh/testkit/harness'
import { text } from '@dsh/llm'
import type { Agent } from '@dsh/agent'
import { SubagentService, type SubagentRequest } from '@dsh/subagent'
import { AcpPlugin, type AcpProviderConfig } from '@dsh/subagent-acp'

const here = dirname(fileURLToPath(import.meta.url))
export const repoRoot = resolve(here, '../../../..')
export const dshMain = join(repoRoot, 'packages/cli/dsh/dist/main.js')
export const exampleAgent = join(repoRoot, 'node_modules/acp-sdk-v1/dist/examples/agent.js')

export function fixture(name: string): string {
  return join(here, 'fixtures', name)
}

/** Short grace periods: the fixtures either exit on EOF at once or never do. */
export const FAST = { stdinGraceMs: 1000, termGraceMs: 300, startupTimeoutMs: 8000, cancelGraceMs: 3000 }

export interface Setup {
  harness: Harness
  parent: Agent
  request(prompt: string, extra?: Partial<SubagentRequest>): SubagentRequest
}

/** A real harness with the subagent service and one acp provider; the parent is a real agent. */
export async function setup(config: Partial<AcpProviderConfig> & { command: string }, parentCwd?: string): Promise<Setup> {
  const harness = await createHarness({ script: [{ reply: [{ text: 'unused' }] }] })
  await harness.plugin(SubagentService)
  await harness.plugin(AcpPlugin, { ...FAST, ...config })
  const parent = await harness.agent(parentCwd ? { meta: { cwd: parentCwd } } : {})
  return {
    harness,
    parent,
    request: (prompt, extra = {}) => ({ prompt: [text(prompt)], parent, signal: new AbortController().signal, ...extra }),
  }
}

/** Live (non-zombie) child processes of this test process, from /proc. */
export function liveChildren(): number[] {
  const children: number[] = []
  for (const name of readdirSync('/proc')) {
    if (!/^\d+$/.test(name)) continue
    let stat: string
    try {
      stat = readFileSync(`/proc/${name}/stat`, 'utf8')
    } catch {
      continue
    }
    const [state, ppid] = stat.slice(stat.lastIndexOf(')') + 2).split(' ')
    if (Number(ppid) === process.pid && state !== 'Z') children.push(Number(name))
  }
  return children
}

/** Whether `pid` is a live process (a zombie counts as gone: it is dead, only unreaped). */
export function isAlive(pid: number): boolean {
  try {
    process.kill(pid, 0)
  } catch (error) {
    if ((error as NodeJS.ErrnoException).code === 'ESRCH') return false
    throw error
  }
  try {
    const stat = readFileSync(`/proc/${pid}/stat`, 'utf8')
    return stat.slice(stat.lastIndexOf(')') + 2)[0] !== 'Z'
  } catch {
    return false
  }
}

export function openFds(): number {
  return readdirSync('/proc/self/fd').length
}

/** Poll until `check` holds (for the test's view of a child it just started). */
export async function waitFor<T>(check: () => T | undefined, ms = 5000): Promise<T> {
  const deadline = Date.now() + ms
  for (;;) {
    const value = check()
    if (value !== undefined) return value
    if (Date.now() > deadline) throw new Error(`condition not met within ${ms} ms`)
    await new Promise((resolveTimer) => setTimeout(resolveTimer, 20))
  }
}
