import { afterEach, describe, expect, it } from 'vitest'
import { createHarness, gateTool, type Harness, type HarnessOptions } from '@dsh/testkit/harness'
import { text, textOf } from '@dsh/llm'
import type { Agent } from '@dsh/agent'
import { SubagentService, type SubagentRequest } from '@dsh/subagent'
import { SpawnPlugin } from '@dsh/subagent-spawn'

let harness: Harness
let parent: Agent
afterEach(async () => {
  await harness?.dispose()
})

async function setup(script: HarnessOptions['script'], options: Omit<HarnessOptions, 'script'> = {}) {
  harness = await createHarness({ script, ...options })
  await harness.plugin(SubagentService)
  await harness.plugin(SpawnPlugin, {})
  parent = await harness.agent()
}

const request = (prompt: string, extra: Partial<SubagentRequest> = {}): SubagentRequest => ({ prompt: [text(prompt)], parent, signal: new AbortController().signal, ...extra })

/** The persona (first section of the system prompt) each session's model requests carried, by session id. */
function captureSystemPrompts(): Map<string, string> {
  const systems = new Map<string, string>()
  const adapter = harness.ctx.llm.getAdapter('scripted')!
  const stream = adapter.stream.bind(adapter)
  adapter.stream = (req) => {
    // The persona heads the prompt; the sections after it are not what these tests are about.
    systems.set(req.origin.sessionId, req.system.split('\n\n')[0]!)
    return stream(req)
  }
  return systems
}

describe('spawn: a fresh in-process child', () => {
  it('runs the child in its own session whose header records its lineage', async () => {
    await setup([{ when: { prompt: 'child task' }, reply: [{ text: 'child answer' }] }])
    const run = await harness.ctx.subagents.start('spawn', request('child task', { label: 'a task' }))
    const child = harness.ctx.agents.get(run.id)!
    expect(run.local).toBe(true)
    expect(child.session.id).not.toBe(parent.session.id)
    expect(child.session.header).toMatchObject({ parentSession: parent.id, origin: 'subagent', delegationDepth: 1, provider: 'spawn', label: 'a task', cwd: parent.session.header.cwd })
    expect(child.session.seedLength).toBe(0)
    expect(await run.result).toEqual({ output: [text('child answer')], stopReason: 'completed' })
    expect(parent.session.length).toBe(0)
    await run.dispose()
  })

  it('the live child is reachable through ctx.agents during the subagent/start notification', async () => {
    await setup([{ reply: [{ text: 'ok' }] }])
    let seen: Agent | undefined
    harness.ctx.on('subagent/start', (info) => {
      seen = harness.ctx.agents.get(info.id)
    })
    const run = await harness.ctx.subagents.start('spawn', request('x'))
    expect(seen?.id).toBe(run.id)
    expect(seen?.status === 'running' || seen?.status === 'idle').toBe(true)
    await run.result
    await run.dispose()
  })

  it('dispose is idempotent and resolves only once the child agent and session are released', async () => {
    await setup([{ reply: [{ text: 'ok' }] }])
    const run = await harness.ctx.subagents.start('spawn', request('x'))
    await run.result
    const child = harness.ctx.agents.get(run.id)!
    const first = run.dispose()
    const second = run.dispose()
    expect(second).toBe(first)
    await first
    expect(child.status).toBe('disposed')
    expect(child.session.released).toBe(true)
    expect(harness.ctx.agents.get(run.id)).toBeUndefined()
    expect(harness.ctx.sessions.get(run.id)).toBeUndefined()
  })

  it('cancel mid-turn resolves aborted with the partial output', async () => {
    await setup([{ reply: [{ call: { tool: 'hang', args: {} }, text: 'working on it' }, { text: 'never' }] }])
    let entered!: () => void
    const inTool = new Promise<void>((resolve) => (entered = resolve))
    harness.ctx.tools.register({
      name: 'hang',
      description: 'hangs',
      parameters: { type: 'object' },
      execute: (_args, exec) => new Promise<string>((resolve) => {
        entered()
        exec.signal.addEventListener('abort', () => resolve('stopped'))
      }),
    })
    const run = await harness.ctx.subagents.start('spawn', request('x'))
    await inTool
    run.cancel()
    const result = await run.result
    expect(result.stopReason).toBe('aborted')
    expect(result.output).toEqual([text('working on it')])
    await run.dispose()
  })

  it('sendMessage, a runtime feature present on the run, steers the running child into its next step', async () => {
    await setup([{ reply: [{ call: { tool: 'gate', args: {} } }, { text: 'saw it' }] }])
    const gate = gateTool(harness)
    const run = await harness.ctx.subagents.start('spawn', request('x'))
    expect(typeof run.sendMessage).toBe('function')
    await gate.entered
    run.sendMessage!('also check the tests')
    gate.release()
    expect((await run.result).stopReason).toBe('completed')
    const child = harness.ctx.agents.get(run.id)!
    const users = child.session.events().filter((event) => event.type === 'user/message').map((event) => event.type === 'user/message' && textOf(event.message.content))
    expect(users).toEqual(['x', 'also check the tests'])
    await run.dispose()
  })

  it('aborting the request signal after publication ends the run aborted', async () => {
    await setup([{ reply: [{ text: 'slow', delay_ms: 60_000 }] }])
    const controller = new AbortController()
    const run = await harness.ctx.subagents.start('spawn', request('x', { signal: controller.signal }))
    controller.abort()
    expect((await run.result).stopReason).toBe('aborted')
    await run.dispose()
  })

  it('aborting a signal several runs share ends each run still going aborted', async () => {
    await setup([{ when: { prompt: '^quick' }, reply: [{ text: 'done' }] }, { reply: [{ text: 'slow', delay_ms: 60_000 }] }])
    const controller = new AbortController()
    const shared = { signal: controller.signal }
    const quick = await harness.ctx.subagents.start('spawn', request('quick', shared))
    const slow = await Promise.all([1, 2, 3].map((n) => harness.ctx.subagents.start('spawn', request(`slow ${n}`, shared))))
    expect((await quick.result).stopReason).toBe('completed')
    await quick.dispose()
    controller.abort()
    for (const run of slow) expect((await run.result).stopReason).toBe('aborted')
    await Promise.all(slow.map((run) => run.dispose()))
  })

  it('an aborted signal before publication rejects and leaves no agent or session', async () => {
    await setup([{ reply: [{ text: 'x' }] }])
    const controller = new AbortController()
    controller.abort()
    await expect(harness.ctx.subagents.start('spawn', request('x', { signal: controller.signal }))).rejects.toMatchObject({ code: 'ABORTED' })
    expect(harness.ctx.agents.list()).toEqual([parent])
    expect(harness.ctx.sessions.list()).toEqual([parent.session])
  })

  it('a model error settles error with the provider message as diagnostic', async () => {
    await setup([{ reply: [{ error: 'quota exceeded' }] }])
    const run = await harness.ctx.subagents.start('spawn', request('x'))
    expect(await run.result).toMatchObject({ stopReason: 'error', output: [], diagnostic: expect.stringContaining('quota exceeded') })
    await run.dispose()
  })
})

describe('spawn: start-time features', () => {
  it('maxDepth is absolute: 0 forbids any delegation, and the error names both numbers', async () => {
    await setup([{ reply: [{ text: 'x' }] }])
    await expect(harness.ctx.subagents.start('spawn', request('x', { maxDepth: 0 }))).rejects.toMatchObject({
      code: 'DEPTH_LIMIT',
      message: expect.stringMatching(/depth 1, above maxDepth 0/),
    })
    expect(harness.ctx.agents.list()).toEqual([parent])
  })

  it('maxDepth 1 lets a root delegate but not its child, even when the child asks for a looser bound', async () => {
    await setup([{ reply: [{ text: 'x' }] }])
    const run = await harness.ctx.subagents.start('spawn', request('x', { maxDepth: 1 }))
    const child = harness.ctx.agents.get(run.id)!
    expect(child.depth).toBe(1)
    await run.result
    await expect(harness.ctx.subagents.start('spawn', { ...request('y', { maxDepth: 1 }), parent: child })).rejects.toMatchObject({
      code: 'DEPTH_LIMIT',
      message: expect.stringMatching(/depth 2, above maxDepth 1/),
    })
    // The bound is inherited and recorded: a looser request, or none, does not widen it.
    expect(child.session.header.maxDepth).toBe(1)
    const agentsBefore = harness.ctx.agents.list().length
    for (const looser of [{ maxDepth: 5 }, {}]) {
      await expect(harness.ctx.subagents.start('spawn', { ...request('y', looser), parent: child })).rejects.toMatchObject({
        code: 'DEPTH_LIMIT',
        message: expect.stringMatching(/depth 2, above maxDepth 1 \(inherited/),
      })
    }
    expect(harness.ctx.agents.list()).toHaveLength(agentsBefore)
    await run.dispose()
  })

  it('a toolFilter hides denied tools from the child\'s schema and blocks their execution', async () => {
    await setup([{ reply: [{ call: { tool: 'secret', args: {} } }, { text: 'result: {{last_tool_result}}' }] }])
    let ran = false
    harness.ctx.tools.register({ name: 'secret', description: 's', parameters: { type: 'object' }, execute: () => { ran = true; return 'leaked' } })
    harness.ctx.tools.register({ name: 'public', description: 'p', parameters: { type: 'object' }, execute: () => 'fine' })
    const run = await harness.ctx.subagents.start('spawn', request('x', { toolFilter: { deny: ['secret'] } }))
    expect(harness.ctx.tools.list(run.id)).toEqual(['public'])
    const result = await run.result
    expect(ran).toBe(false)
    expect(textOf(result.output)).toContain('unknown tool "secret"')
    expect(harness.ctx.tools.list(parent.id)).toEqual(['secret', 'public'])
    await run.dispose()
  })

  it('an unknown tool in toolFilter rejects start with no orphaned agent or session', async () => {
    await setup([{ reply: [{ text: 'x' }] }])
    await expect(harness.ctx.subagents.start('spawn', request('x', { toolFilter: { allow: ['no_such_tool'] } }))).rejects.toMatchObject({
      code: 'START_FAILED',
      message: expect.stringContaining('no_such_tool'),
    })
    expect(harness.ctx.agents.list()).toEqual([parent])
    expect(harness.ctx.sessions.list()).toEqual([parent.session])
  })

  it('a persona replaces the deployment persona for that child only', async () => {
    await setup([{ reply: [{ text: 'x' }] }, { reply: [{ text: 'y' }] }], { persona: 'deployment persona' })
    const systems = captureSystemPrompts()
    const run = await harness.ctx.subagents.start('spawn', request('x', { persona: 'You are a strict reviewer.' }))
    await run.result
    await parent.followup('hello')
    expect(systems.get(run.id)).toBe('You are a strict reviewer.')
    expect(systems.get(parent.id)).toBe('deployment persona')
    await run.dispose()
  })

  it('sendMessage on a settled run throws RUN_SETTLED and starts no turn', async () => {
    await setup([{ reply: [{ text: 'done' }] }, { reply: [{ text: 'an untracked, billable turn' }] }])
    const run = await harness.ctx.subagents.start('spawn', request('x'))
    await run.result
    const child = harness.ctx.agents.get(run.id)!
    expect(() => run.sendMessage!('one more thing')).toThrow(expect.objectContaining({ name: 'SubagentError', code: 'RUN_SETTLED' }))
    expect(child.status).toBe('idle')
    expect(child.session.events().filter((event) => event.type === 'user/message')).toHaveLength(1)
    await run.dispose()
  })

  it('a disposed parent cannot delegate: the provider refuses PARENT_DISPOSED and creates no agent and no session', async () => {
    await setup([{ reply: [{ text: 'never' }] }])
    await parent.dispose()
    const spawn = harness.ctx.subagents.getProvider('spawn')!
    await expect(spawn.start(request('x'))).rejects.toMatchObject({ name: 'SubagentError', code: 'PARENT_DISPOSED' })
    expect(harness.ctx.agents.list()).toEqual([])
    expect(harness.ctx.sessions.list()).toEqual([])
  })

  it('a parent that starts disposing while its child is created gets no child: the child is disposed and start rejects', async () => {
    await setup([{ reply: [{ text: 'never' }] }])
    const spawn = harness.ctx.subagents.getProvider('spawn')!
    const starting = spawn.start(request('x'))
    const disposing = parent.dispose()
    await expect(starting).rejects.toMatchObject({ code: 'PARENT_DISPOSED' })
    await disposing
    expect(harness.ctx.agents.list()).toEqual([])
    expect(harness.ctx.sessions.list()).toEqual([])
  })

  it('a persona applies to the child it was given to, not to that child\'s own children', async () => {
    await setup([{ reply: [{ text: 'child' }] }, { reply: [{ text: 'grandchild' }] }], { persona: 'deployment persona' })
    const systems = captureSystemPrompts()
    const run = await harness.ctx.subagents.start('spawn', request('x', { persona: 'You are a strict reviewer.' }))
    await run.result
    const child = harness.ctx.agents.get(run.id)!
    const grandchild = await harness.ctx.subagents.start('spawn', { prompt: [text('y')], parent: child, signal: new AbortController().signal })
    await grandchild.result
    expect(systems.get(run.id)).toBe('You are a strict reviewer.')
    expect(systems.get(grandchild.id)).toBe('deployment persona')
    await grandchild.dispose()
    await run.dispose()
  })

  it('structured output is validated: an invalid call is returned to the child, a valid one ends its turn', async () => {
    await setup([{
      reply: [
        { call: { tool: 'structured_output', args: { score: 'high' } } },
        { call: { tool: 'structured_output', args: { score: 9, verdict: 'ship it' } } },
        { text: 'never reached' },
      ],
    }])
    const schema = { type: 'object', properties: { score: { type: 'number' }, verdict: { type: 'string' } }, required: ['score', 'verdict'] }
    const run = await harness.ctx.subagents.start('spawn', request('review', { outputSchema: schema }))
    const result = await run.result
    expect(result.stopReason).toBe('completed')
    expect(result.structured).toEqual({ score: 9, verdict: 'ship it' })
    const child = harness.ctx.agents.get(run.id)!
    const errors = child.session.events().filter((event) => event.type === 'tool/result' && event.result.isError)
    expect(errors).toHaveLength(1)
    expect(harness.ctx.tools.list(parent.id)).not.toContain('structured_output')
    await run.dispose()
  })

  it('a child that finishes without a valid structured_output call ends error with a diagnostic', async () => {
    await setup([{ reply: [{ text: 'here is prose instead' }] }])
    const run = await harness.ctx.subagents.start('spawn', request('x', { outputSchema: { type: 'object', properties: { a: { type: 'string' } } } }))
    const result = await run.result
    expect(result).toMatchObject({ stopReason: 'error', diagnostic: expect.stringContaining('without a valid structured_output call'), output: [text('here is prose instead')] })
    await run.dispose()
  })

  it('the provider name comes from config', async () => {
    await setup([{ reply: [{ text: 'x' }] }])
    await harness.plugin(SpawnPlugin, { providerName: 'cheap' })
    expect(harness.ctx.subagents.list()).toEqual(['spawn', 'cheap'])
    expect(harness.ctx.subagents.getProvider('cheap')?.inheritsParentContext).toBe(false)
  })
})

describe('spawn: depth across resume', () => {
  it('a resumed child keeps the depth its header recorded, so the bound still holds', async () => {
    const { mkdtempSync } = await import('node:fs')
    const { tmpdir } = await import('node:os')
    const { join } = await import('node:path')
    const { default: SessionJsonl } = await import('@dsh/session-jsonl')
    const dir = mkdtempSync(join(tmpdir(), 'spawn-resume-'))
    await setup([{ reply: [{ text: 'child answer' }] }])
    await harness.plugin(SessionJsonl, { dir })
    const run = await harness.ctx.subagents.start('spawn', request('x'))
    await run.result
    await run.dispose()
    await harness.dispose()

    await setup([{ reply: [{ text: 'resumed answer' }] }])
    await harness.plugin(SessionJsonl, { dir })
    const resumed = await harness.agent({ sessionId: run.id })
    expect(resumed.depth).toBe(1)
    expect(resumed.session.header.delegationDepth).toBe(1)
    await expect(harness.ctx.subagents.start('spawn', { ...request('deeper', { maxDepth: 1 }), parent: resumed })).rejects.toMatchObject({ code: 'DEPTH_LIMIT' })
  })
})

describe('spawn: persistence of a rejected start', () => {
  it('a start rejected in the child\'s setup leaves no session file behind', async () => {
    const { mkdtempSync, readdirSync } = await import('node:fs')
    const { tmpdir } = await import('node:os')
    const { join } = await import('node:path')
    const { default: SessionJsonl } = await import('@dsh/session-jsonl')
    const dir = mkdtempSync(join(tmpdir(), 'spawn-rejected-'))
    await setup([{ reply: [{ text: 'x' }] }])
    await harness.plugin(SessionJsonl, { dir })
    await expect(harness.ctx.subagents.start('spawn', request('x', { toolFilter: { allow: ['no_such_tool'] } }))).rejects.toMatchObject({ code: 'START_FAILED' })
    const ok = await harness.ctx.subagents.start('spawn', request('x'))
    await ok.result
    await ok.dispose()
    // The parent existed before session-jsonl loaded, so its file is written at some
    // point after the load; leave it out rather than race it. Only the child that started
    // may have a file: the rejected one left nothing behind.
    // (Lock files of live sessions are not session files.)
    expect(readdirSync(dir).filter((name) => name.endsWith('.jsonl') && name !== `${parent.id}.jsonl`)).toEqual([`${ok.id}.jsonl`])
  })
})
