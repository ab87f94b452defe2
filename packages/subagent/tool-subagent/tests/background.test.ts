import { mkdtempSync, rmSync, writeFileSync } from 'node:fs'
import { tmpdir } from 'node:os'
import { join } from 'node:path'
import { afterEach, describe, expect, it, vi } from 'vitest'
import { createHarness, type Harness, type HarnessOptions } from '@dsh/testkit/harness'
import type { Agent } from '@dsh/agent'
import { BashService } from '@dsh/bash'
import { text, textOf } from '@dsh/llm'
import { SubagentService, type SubagentProvider, type SubagentResult, type SubagentRun } from '@dsh/subagent'
import { SpawnPlugin } from '@dsh/subagent-spawn'
import { TaskService } from '@dsh/tasks'
import { BashToolPlugin } from '@dsh/tool-bash'
import { TaskToolsPlugin } from '@dsh/tool-tasks'
import { SubagentToolPlugin } from '@dsh/tool-subagent'
import { runOutcome, settleRun } from '../src/background.js'
import { exists } from '@dsh/testkit'
import { ScriptedAdapter } from '@dsh/llm-scripted'

let harness: Harness
afterEach(async () => {
  await harness?.dispose()
})

interface SetupOptions {
  tasks?: boolean
  maxLiveTasksPerOwner?: number
  provider?: SubagentProvider
}

/** Real services and the scripted model; spawn children, the task runtime and tools, background bash. */
async function setup(script: HarnessOptions['script'], options: SetupOptions = {}) {
  harness = await createHarness({ script })
  await harness.plugin(SubagentService)
  if (options.provider) {
    const provider = options.provider
    await harness.plugin({ name: 'fake-provider', inject: ['subagents'], apply: (ctx: Harness['ctx']) => void ctx.subagents.registerProvider(provider) })
  } else {
    await harness.plugin(SpawnPlugin, {})
  }
  if (options.tasks !== false) {
    await harness.plugin(TaskService, options.maxLiveTasksPerOwner === undefined ? {} : { maxLiveTasksPerOwner: options.maxLiveTasksPerOwner })
    await harness.plugin(TaskToolsPlugin)
  }
  await harness.plugin(BashService)
  await harness.plugin(BashToolPlugin)
  await harness.plugin(SubagentToolPlugin, { provider: options.provider?.name ?? 'spawn' })
}

function results(agent: Agent) {
  return agent.session.events().flatMap((event) =>
    event.type === 'tool/result' ? [{ name: event.result.name, text: textOf(event.result.content), isError: event.result.isError === true }] : [],
  )
}

function notices(agent: Agent): string[] {
  return agent.session.events().flatMap((event) => (event.type === 'user/message' && /^Background task update/.test(textOf(event.message.content)) ? [textOf(event.message.content)] : []))
}


function scriptedAdapter(): ScriptedAdapter {
  const adapter = harness.ctx.llm.getAdapter('scripted')
  if (!(adapter instanceof ScriptedAdapter)) throw new Error('the harness has no scripted adapter')
  return adapter
}

/** A provider whose start waits for the test, like an out-of-process child that takes a while to come up. */
function slowProvider() {
  let settleStart: { resolve: () => void; reject: (error: Error) => void } | undefined
  let lastSignal: AbortSignal | undefined
  const state = {
    starts: 0,
    cancels: [] as string[],
    signal: () => lastSignal,
    fail: (error: Error) => settleStart?.reject(error),
    succeed: () => settleStart?.resolve(),
    provider: {
      name: 'slow',
      capabilities: { outputSchema: false, depthLimit: true, toolFilter: false, persona: false },
      inheritsParentContext: false,
      start: (request) => {
        state.starts++
        lastSignal = request.signal
        return new Promise<SubagentRun>((resolve, reject) => {
          settleStart = {
            reject,
            resolve: () => {
              let finish!: (result: SubagentResult) => void
              const result = new Promise<SubagentResult>((settle) => (finish = settle))
              resolve({
                id: 'slow-child',
                local: false,
                result,
                cancel: (reason) => {
                  state.cancels.push(reason)
                  finish({ output: [], stopReason: 'aborted' })
                },
                dispose: async () => {},
              })
            },
          }
        })
      },
    } satisfies SubagentProvider,
  }
  return state
}

const background = (description: string, prompt = 'child task') => ({ tool: 'subagent', args: { description, prompt, run_in_background: true } })
const delay = (ms: number) => new Promise((resolve) => setTimeout(resolve, ms))

describe('outcome mapping', () => {
  it('completed carries the answer, aborted is killed, every other stop reason fails with reason and diagnostic', () => {
    expect(runOutcome({ output: [text('the answer')], stopReason: 'completed' })).toEqual({ status: 'completed', output: 'the answer' })
    expect(runOutcome({ output: [text('x')], structured: { n: 1 }, stopReason: 'completed' })).toEqual({ status: 'completed', output: '{"n":1}' })
    expect(runOutcome({ output: [text('half')], stopReason: 'aborted' })).toMatchObject({ status: 'killed', output: 'half' })
    expect(runOutcome({ output: [], stopReason: 'error', diagnostic: 'model overloaded' })).toEqual({ status: 'failed', detail: 'error: model overloaded', output: '' })
    expect(runOutcome({ output: [], stopReason: 'max-tokens' })).toMatchObject({ status: 'failed', detail: 'max-tokens' })
    expect(runOutcome({ output: [text('no')], stopReason: 'refusal' })).toEqual({ status: 'failed', detail: 'refusal', output: 'no' })
  })

  it('settleRun settles only after dispose, on both result paths, and contains an infrastructure rejection', async () => {
    const order: string[] = []
    const fakeRun = (result: Promise<SubagentResult>): SubagentRun => ({
      id: 'r',
      local: false,
      result,
      cancel: () => {},
      dispose: async () => {
        await delay(20)
        order.push('disposed')
      },
    })
    const ok = await settleRun(fakeRun(Promise.resolve({ output: [text('fine')], stopReason: 'completed' })))
    order.push('settled')
    const broken = await settleRun(fakeRun(Promise.reject(new Error('transport exploded'))))
    order.push('settled')
    expect(ok).toEqual({ status: 'completed', output: 'fine' })
    expect(broken).toEqual({ status: 'failed', detail: 'the subagent run failed: transport exploded' })
    expect(order).toEqual(['disposed', 'settled', 'disposed', 'settled'])
  })
})

describe('background delegation', () => {
  it('returns a task id at once and is collected with task_output (wait)', async () => {
    await setup([
      { when: { depth: 1 }, reply: [{ text: 'child answer', delay_ms: 100 }] },
      {
        when: { depth: 0 },
        reply: [
          { call: background('research') },
          { call: { tool: 'task_output', args: { task_id: 'subagent-1', wait: true, timeout_ms: 10_000 } } },
          { text: 'the child said: {{last_tool_result}}' },
        ],
      },
    ])
    const parent = await harness.agent()
    await parent.followup('go')
    const [started, collected] = results(parent)
    expect(started).toMatchObject({ name: 'subagent', isError: false, text: expect.stringMatching(/^started background subagent task subagent-1\b/) })
    expect(collected).toMatchObject({ name: 'task_output', isError: false, text: 'subagent-1 completed · subagent: research\nchild answer' })
    expect(notices(parent)).toEqual([])
    // The task settled only once the child was released.
    expect(harness.ctx.agents.list()).toEqual([parent])
  })

  it('task_output on a running child returns what it did since the last read, then its answer once it ends', async () => {
    const gates = mkdtempSync(join(tmpdir(), 'dsh-bg-activity-'))
    const ready = join(gates, 'ready')
    const go = join(gates, 'go')
    const waitFor = (file: string) => ({ tool: 'bash', args: { command: `until [ -e '${file}' ]; do sleep 0.02; done; echo ok` } })
    await setup([
      { when: { depth: 1 }, reply: [{ text: 'checking the files', call: waitFor(go) }, { text: 'the child found 42' }] },
      {
        when: { depth: 0 },
        reply: [
          { call: background('research') },
          { call: waitFor(ready) },
          { call: { tool: 'task_output', args: { task_id: 'subagent-1' } } },
          { call: { tool: 'task_output', args: { task_id: 'subagent-1' } } },
          { call: { tool: 'bash', args: { command: `touch '${go}'` } } },
          { call: { tool: 'task_output', args: { task_id: 'subagent-1', wait: true, timeout_ms: 10_000 } } },
          { text: 'done' },
        ],
      },
    ])
    // The parent reads only once the child is inside its tool call (its progress said so).
    harness.ctx.on('subagent/progress', (info) => {
      if (info.updates.some((update) => update.kind === 'tool-start')) writeFileSync(ready, '')
    })
    const parent = await harness.agent()
    await parent.followup('go')
    const reads = results(parent).filter((result) => result.name === 'task_output')
    expect(reads[0].text).toMatch(/^subagent-1 running \(.+\) · subagent: research\nchecking the files\n→ bash \{"command":"until \[ -e '.+go' \]; do sleep 0\.02; done; echo ok"\}\n$/)
    expect(reads[1].text).toMatch(/^subagent-1 running \(.+\) · subagent: research\n\(no new output\)$/)
    expect(reads[2].text).toBe('subagent-1 completed · subagent: research\nthe child found 42')
    rmSync(gates, { recursive: true, force: true })
  })

  it('is stopped with task_kill: the task ends killed with the reason and the child is gone', async () => {
    await setup([
      { when: { depth: 1 }, reply: [{ text: 'never', delay_ms: 60_000 }] },
      { when: { depth: 0 }, reply: [{ call: background('research') }, { call: { tool: 'task_kill', args: { task_id: 'subagent-1', reason: 'changed my mind' } } }, { text: 'ok' }] },
    ])
    const parent = await harness.agent()
    // The child would answer after a minute, past the test's timeout: the turn ends because the kill stopped it.
    await parent.followup('go')
    expect(results(parent)[1]).toMatchObject({ name: 'task_kill', text: 'subagent-1 killed: changed my mind · subagent: research' })
    expect(harness.ctx.agents.list()).toEqual([parent])
    expect(notices(parent)).toEqual([])
  })

  it('forwards the kill reason to run.cancel and settles the task only after run.dispose()', async () => {
    const seen = { cancels: [] as unknown[], disposed: false, signals: [] as AbortSignal[] }
    const provider: SubagentProvider = {
      name: 'fake',
      capabilities: { outputSchema: false, depthLimit: true, toolFilter: false, persona: false },
      inheritsParentContext: false,
      start: async (request) => {
        seen.signals.push(request.signal)
        let finish!: (result: SubagentResult) => void
        const result = new Promise<SubagentResult>((resolve) => (finish = resolve))
        return {
          id: 'fake-child',
          local: false,
          result,
          cancel: (reason) => {
            seen.cancels.push(reason)
            finish({ output: [text('partial')], stopReason: 'aborted' })
          },
          dispose: async () => {
            await delay(30)
            seen.disposed = true
          },
        }
      },
    }
    await setup([{ reply: [{ call: background('fake work') }, { call: { tool: 'task_kill', args: { task_id: 'subagent-1', reason: 'budget' } } }, { text: 'ok' }] }], { provider })
    let disposedAtSettlement: boolean | undefined
    harness.ctx.tasks.onSettled(() => (disposedAtSettlement = seen.disposed))
    const parent = await harness.agent()
    await parent.followup('go')
    expect(seen.cancels).toEqual(['budget'])
    expect(disposedAtSettlement).toBe(true)
    // The run's signal belongs to the task, not to the tool call (which ended long ago).
    expect(seen.signals[0].aborted).toBe(false)
    expect(harness.ctx.tasks.read('subagent-1', parent.id)).toMatchObject({ text: 'partial', task: { status: 'killed', detail: 'budget' } })
  })

  it('outlives the call that started it: cancelling the parent\'s turn does not touch the child, whose notice then wakes the parent', async () => {
    let release!: () => void
    await setup([
      { when: { depth: 1 }, reply: [{ text: 'child answer', delay_ms: 150 }] },
      { when: { depth: 0 }, reply: [{ call: background('research') }, { call: { tool: 'hold', args: {} } }, { text: 'noticed: {{last_tool_result}}' }] },
    ])
    let held!: () => void
    const holding = new Promise<void>((resolve) => (held = resolve))
    harness.ctx.tools.register({
      name: 'hold',
      description: 'hold',
      parameters: { type: 'object' },
      execute: (_args, exec) =>
        new Promise<string>((resolve) => {
          release = () => resolve('released')
          exec.signal.addEventListener('abort', () => resolve('aborted'))
          held()
        }),
    })
    const parent = await harness.agent()
    const turn = parent.followup('go')
    await holding
    parent.cancel()
    expect((await turn).reason).toBe('aborted')
    await vi.waitFor(() => expect(notices(parent)).toHaveLength(1), { timeout: 5_000, interval: 10 })
    await parent.whenIdle()
    expect(notices(parent)[0]).toContain('subagent-1 completed · subagent: research')
    expect(parent.session.events().filter((event) => event.type === 'turn/start')).toHaveLength(2)
    expect(harness.ctx.tasks.read('subagent-1', parent.id).text).toBe('child answer')
    release?.()
  })

  it('refuses an already-aborted call without starting a child', async () => {
    await setup([{ reply: [{ text: 'unused' }] }])
    const parent = await harness.agent()
    const controller = new AbortController()
    controller.abort()
    const tool = harness.ctx.tools.get('subagent', parent.id)!
    const output = await tool.execute({ description: 'x', prompt: 'child task', run_in_background: true }, { signal: controller.signal, callId: 'c1', agent: parent })
    expect(output).toEqual({ isError: true, content: 'the subagent was not started: the call was aborted' })
    expect(harness.ctx.agents.list()).toEqual([parent])
    expect(harness.ctx.tasks.list(parent.id)).toEqual([])
  })

  it('without ctx.tasks fails loudly, naming the packages to load', async () => {
    await setup([{ reply: [{ call: background('x') }, { text: 'ok' }] }], { tasks: false })
    const parent = await harness.agent()
    await parent.followup('go')
    expect(results(parent)).toEqual([{ name: 'subagent', isError: true, text: 'background delegation needs the tasks runtime: load @dsh/tasks and @dsh/tool-tasks' }])
    expect(harness.ctx.agents.list()).toEqual([parent])
  })

  it('with limit 1, of two parallel calls one is refused, creating no agent, no session and no model request', async () => {
    await setup(
      [
        { when: { depth: 1 }, reply: [{ text: 'slow', delay_ms: 60_000 }] },
        { when: { depth: 0 }, reply: [{ calls: [background('first'), background('second')] }, { text: 'ok' }] },
      ],
      { maxLiveTasksPerOwner: 1 },
    )
    const parent = await harness.agent()
    await parent.followup('go')
    const [, second] = results(parent)
    expect(second).toMatchObject({ isError: true, text: expect.stringMatching(/^the subagent was not started: .*1 live background tasks/) })
    // The refused call created no agent, no session and asked the model nothing: the parent
    // made two requests, the one admitted child one.
    expect(harness.ctx.agents.list()).toHaveLength(2)
    expect(harness.ctx.sessions.list()).toHaveLength(2)
    expect(scriptedAdapter().requestCount).toBe(3)
  })

  it('admission holds while a slow provider is still starting: limit 1, two parallel calls, one start', async () => {
    const slow = slowProvider()
    await setup([{ reply: [{ calls: [background('first'), background('second')] }, { text: 'ok' }] }], { provider: slow.provider, maxLiveTasksPerOwner: 1 })
    const parent = await harness.agent()
    await parent.followup('go')
    const [first, second] = results(parent)
    expect(first).toMatchObject({ isError: false, text: expect.stringMatching(/^started background subagent task subagent-1/) })
    expect(second).toMatchObject({ isError: true, text: expect.stringMatching(/maxLiveTasksPerOwner 1/) })
    await vi.waitFor(() => expect(slow.starts).toBe(1), { interval: 5 })
    slow.fail(new Error('the agent binary was not found'))
    await harness.ctx.tasks.wait('subagent-1', parent.id, 10_000)
  })

  it('returns the task id before an out-of-process child has started; a start that fails ends the task failed with the reason', async () => {
    const slow = slowProvider()
    await setup([{ reply: [{ call: background('remote work') }, { text: 'ok' }] }], { provider: slow.provider })
    const parent = await harness.agent()
    // The turn completes while the provider's start is still pending.
    expect(await parent.followup('go')).toMatchObject({ reason: 'completed' })
    expect(results(parent)[0]).toMatchObject({ isError: false, text: expect.stringContaining('subagent-1') })
    expect(harness.ctx.tasks.get('subagent-1', parent.id).status).toBe('running')
    slow.fail(new Error('the agent binary was not found'))
    const read = await harness.ctx.tasks.wait('subagent-1', parent.id, 10_000)
    expect(read.task).toMatchObject({ status: 'failed', detail: 'the subagent could not be started: the agent binary was not found' })
  })

  it('a task killed while its child is starting ends killed, and a child that starts late is cancelled', async () => {
    const slow = slowProvider()
    await setup([{ reply: [{ call: background('remote work') }, { text: 'ok' }] }], { provider: slow.provider })
    const parent = await harness.agent()
    await parent.followup('go')
    await vi.waitFor(() => expect(slow.starts).toBe(1), { interval: 5 })
    const killed = harness.ctx.tasks.kill('subagent-1', parent.id, 'not needed')
    // The start saw its signal abort; this provider starts anyway, and the run is cancelled.
    expect(slow.signal()?.aborted).toBe(true)
    slow.succeed()
    expect(await killed).toMatchObject({ status: 'killed', detail: 'not needed' })
    expect(slow.cancels).toEqual(['not needed'])
  })
})

describe('background work and its owner', () => {
  it('a parent starts a child and a command in the background, keeps working, then collects both', async () => {
    await setup([
      { when: { depth: 1 }, reply: [{ text: 'the child found 42', delay_ms: 100 }] },
      {
        when: { depth: 0 },
        reply: [
          { calls: [background('find the number'), { tool: 'bash', args: { command: 'sleep 0.2; echo the build passed', run_in_background: true } }] },
          { call: { tool: 'bash', args: { command: 'echo meanwhile' } } },
          {
            calls: [
              { tool: 'task_output', args: { task_id: 'subagent-1', wait: true, timeout_ms: 10_000 } },
              { tool: 'task_output', args: { task_id: 'bash-1', wait: true, timeout_ms: 10_000 } },
            ],
          },
          { text: 'Both are in.' },
        ],
      },
    ])
    const parent = await harness.agent()
    const turn = await parent.followup('go')
    expect(turn.reason).toBe('completed')
    expect(results(parent).map((result) => result.text.split('\n')[0])).toEqual([
      expect.stringMatching(/^started background subagent task subagent-1/),
      expect.stringMatching(/^started background bash task bash-1/),
      'exit code 0',
      'subagent-1 completed · subagent: find the number',
      'bash-1 completed (exit code 0) · bash: sleep 0.2; echo the build passed',
    ])
    expect(results(parent).slice(3).map((result) => result.text.split('\n').slice(1).join('\n'))).toEqual(['the child found 42', 'the build passed\n'])
    expect(notices(parent)).toEqual([])
    expect(harness.ctx.tasks.hasLive(parent.id)).toBe(false)
  })

  it('ids count per kind across delegations and commands', async () => {
    await setup([
      { when: { depth: 1 }, reply: [{ text: 'done' }] },
      {
        when: { depth: 0 },
        reply: [
          {
            calls: [
              background('a'),
              { tool: 'bash', args: { command: 'true', run_in_background: true } },
              background('b'),
              { tool: 'bash', args: { command: 'true', run_in_background: true } },
            ],
          },
          { text: 'ok' },
        ],
      },
    ])
    const parent = await harness.agent()
    await parent.followup('go')
    expect(results(parent).map((result) => /task (\S+?)[;\s]/.exec(result.text)?.[1])).toEqual(['subagent-1', 'bash-1', 'subagent-2', 'bash-2'])
  })

  it('disposing a parent cancels its running background child and sleep, and resolves only after both have stopped', async () => {
    await setup([
      { when: { depth: 1 }, reply: [{ text: 'never', delay_ms: 60_000 }] },
      { when: { depth: 0 }, reply: [{ calls: [background('long research'), { tool: 'bash', args: { command: 'sleep 60', run_in_background: true } }] }, { text: 'both started' }] },
    ])
    const parent = await harness.agent()
    await parent.followup('go')
    const pid = Number(/\(pid (\d+)\)/.exec(results(parent)[1].text)![1])
    const child = harness.ctx.agents.list().find((agent) => agent !== parent)!
    expect(child.status === 'running' || child.status === 'idle').toBe(true)
    // Make the child's release take a while, so a parent disposal that did not wait for it would show.
    let childReleased = false
    harness.ctx.agents.onCleanup(async (agent) => {
      if (agent !== child) return
      await delay(50)
      childReleased = true
    })
    expect(exists(pid)).toBe(true)
    expect(harness.ctx.tasks.hasLive(parent.id)).toBe(true)
    // The child and the sleep would each last a minute, past the test's timeout: dispose returns because it stopped them.
    await parent.dispose()
    expect(childReleased).toBe(true)
    expect(child.status).toBe('disposed')
    expect(child.session.released).toBe(true)
    expect(exists(pid)).toBe(false)
    expect(harness.ctx.agents.list()).toEqual([])
    expect(harness.ctx.tasks.hasLive(parent.id)).toBe(false)
    expect(notices(parent)).toEqual([])
  })
})
