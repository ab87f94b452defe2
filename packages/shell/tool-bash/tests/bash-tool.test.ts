import { mkdtemp, rm } from 'node:fs/promises'
import { tmpdir } from 'node:os'
import { join } from 'node:path'
import { afterEach, describe, expect, it } from 'vitest'
import { createHarness, type Harness, type HarnessOptions } from '@dsh/testkit/harness'
import type { Agent } from '@dsh/agent'
import { BashError, BashService } from '@dsh/bash'
import { textOf } from '@dsh/llm'
import { TaskService } from '@dsh/tasks'
import { TaskToolsPlugin } from '@dsh/tool-tasks'
import { BashToolPlugin } from '@dsh/tool-bash'
import { exists } from '@dsh/testkit'

let harness: Harness
let dir: string | undefined
afterEach(async () => {
  await harness?.dispose()
  if (dir) await rm(dir, { recursive: true, force: true })
  dir = undefined
})

async function setup(script: HarnessOptions['script'], options: { tasks?: boolean } = {}) {
  harness = await createHarness({ script })
  await harness.plugin(BashService)
  if (options.tasks !== false) {
    await harness.plugin(TaskService)
    await harness.plugin(TaskToolsPlugin)
  }
  await harness.plugin(BashToolPlugin)
}

function results(agent: Agent, name?: string) {
  return agent.session.events().flatMap((event) =>
    event.type === 'tool/result' && (name === undefined || event.result.name === name) ? [{ text: textOf(event.result.content), isError: event.result.isError === true }] : [],
  )
}


const pidOf = (text: string) => Number(/\(pid (\d+)\)/.exec(text)?.[1])

describe('bash tool config', () => {
  it('a default timeout above the largest allowed fails at load with INVALID_CONFIG, saying what to change', async () => {
    harness = await createHarness()
    await harness.plugin(BashService)
    const failure = await Promise.resolve(harness.plugin(BashToolPlugin, { defaultTimeoutMs: 5_000, maxTimeoutMs: 1_000 } as never)).then(() => undefined, (error: unknown) => error)
    expect(failure).toBeInstanceOf(BashError)
    expect(failure).toMatchObject({ name: 'BashError', code: 'INVALID_CONFIG' })
    expect((failure as Error).message).toContain('lower defaultTimeoutMs or raise maxTimeoutMs')
  })
})

describe('bash in the foreground', () => {
  it('runs in the session\'s cwd and returns the exit code with the output', async () => {
    await setup([{ reply: [{ calls: [{ tool: 'bash', args: { command: 'pwd' } }, { tool: 'bash', args: { command: 'echo broken >&2; exit 4' } }] }, { text: 'ok' }] }])
    dir = await mkdtemp(join(tmpdir(), 'dsh-tool-bash-'))
    const agent = await harness.agent({ meta: { cwd: dir } })
    await agent.followup('go')
    expect(results(agent)).toEqual([
      { text: `exit code 0\n${dir}\n`, isError: false },
      { text: 'exit code 4\nbroken\n', isError: true },
    ])
  })

  it('a timeout kills the whole tree and says so', async () => {
    await setup([{ reply: [{ call: { tool: 'bash', args: { command: 'echo child=$$; sleep 30', timeout_ms: 300 } } }, { text: 'ok' }] }])
    const agent = await harness.agent()
    const started = Date.now()
    await agent.followup('go')
    expect(Date.now() - started).toBeLessThan(5_000)
    const [result] = results(agent)
    expect(result.isError).toBe(true)
    expect(result.text).toMatch(/^timed out after 300ms; the command and everything it started were stopped\nchild=\d+/)
    expect(exists(Number(/child=(\d+)/.exec(result.text)![1]))).toBe(false)
  })
})

describe('bash in the background', () => {
  it('is a stream task of kind bash, read incrementally with task_output', async () => {
    await setup([
      {
        reply: [
          { call: { tool: 'bash', args: { command: 'echo one; sleep 1; echo two', run_in_background: true } } },
          { call: { tool: 'task_output', args: { task_id: 'bash-1' } }, delay_ms: 300 },
          { call: { tool: 'task_output', args: { task_id: 'bash-1', wait: true, timeout_ms: 5_000 } } },
          { text: 'done' },
        ],
      },
    ])
    const agent = await harness.agent()
    await agent.followup('go')
    const [started, first, second] = results(agent)
    expect(started.text).toMatch(/^started background bash task bash-1 \(pid \d+\)/)
    expect(first.text).toMatch(/^bash-1 running \(\d+ms\) · bash: echo one; sleep 1; echo two\none\n$/)
    expect(second.text).toBe('bash-1 completed (exit code 0) · bash: echo one; sleep 1; echo two\ntwo\n')
    expect(exists(pidOf(started.text))).toBe(false)
  })

  it('without the tasks runtime fails loudly, naming the packages to load', async () => {
    await setup([{ reply: [{ call: { tool: 'bash', args: { command: 'sleep 1', run_in_background: true } } }, { text: 'ok' }] }], { tasks: false })
    const agent = await harness.agent()
    await agent.followup('go')
    expect(results(agent)).toEqual([{ isError: true, text: 'background commands need the tasks runtime: load @dsh/tasks and @dsh/tool-tasks' }])
  })

  it('the admission bound refuses the 11th live command; disposing the owner stops the other ten', async () => {
    const sleep = { tool: 'bash', args: { command: 'sleep 30', run_in_background: true } }
    await setup([{ reply: [{ calls: Array.from({ length: 11 }, () => sleep) }, { text: 'ok' }] }])
    const agent = await harness.agent()
    await agent.followup('go')
    const all = results(agent)
    expect(all.slice(0, 10).map((result) => /^started background bash task (bash-\d+) /.exec(result.text)?.[1])).toEqual(Array.from({ length: 10 }, (_, index) => `bash-${index + 1}`))
    expect(all[10]).toEqual({ isError: true, text: expect.stringMatching(/^the command was not started: .*10 live background tasks.*task_kill/) })
    const pids = all.slice(0, 10).map((result) => pidOf(result.text))
    expect(pids.every(exists)).toBe(true)
    await agent.dispose()
    expect(pids.filter(exists)).toEqual([])
  })
})
