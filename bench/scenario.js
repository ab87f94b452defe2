// One benchmark scenario in a fresh process. Prints one JSON object: { name: value, ... }.
// Run through bench/run.js, which repeats each scenario in new processes and takes medians.
import { createHarness } from '@dsh/testkit/harness'
import { serviceInstance } from '@dsh/agent'
import { text } from '@dsh/llm'
import { SubagentService } from '@dsh/subagent'
import { SpawnPlugin } from '@dsh/subagent-spawn'
import { ForkPlugin } from '@dsh/subagent-fork'
import { SubagentToolPlugin } from '@dsh/tool-subagent'
import SessionJsonl from '@dsh/session-jsonl'
import { ApprovalService } from '@dsh/approvals'
import { mkdtemp, rm } from 'node:fs/promises'
import { tmpdir } from 'node:os'
import { join } from 'node:path'

const [name, arg] = process.argv.slice(2)

function cpuMicros() {
  const { user, system } = process.cpuUsage()
  return user + system
}

function gc() {
  if (!global.gc) throw new Error('run with --expose-gc')
  global.gc()
  global.gc()
}

/**
 * The harness every scenario runs on. `persisted`: the real JSONL store on a fresh temp
 * directory (removed by `dispose`), as `dsh run` has it by default.
 */
async function harnessWith(script, { persisted = false } = {}) {
  const harness = await createHarness({ script })
  if (persisted) {
    const dir = await mkdtemp(join(tmpdir(), 'dsh-bench-'))
    await harness.plugin(SessionJsonl, { dir })
    const dispose = harness.dispose
    harness.dispose = async () => {
      await dispose()
      await rm(dir, { recursive: true, force: true })
    }
  }
  await harness.plugin(SubagentService)
  await harness.plugin(SpawnPlugin, {})
  await harness.plugin(ForkPlugin, {})
  await harness.plugin(SubagentToolPlugin, { provider: 'spawn', enableRunInBackground: false })
  harness.ctx.tools.register({ name: 'noop', description: 'does nothing', parameters: { type: 'object' }, concurrencySafe: true, execute: () => 'done' })
  return harness
}

const repeat = (count, make) => Array.from({ length: count }, make).flat()

/**
 * Parent turns that delegate to a spawn child, against parent turns that call a no-op tool
 * (the same number of parent steps). Measured in interleaved rounds and reported as the
 * median of the per-round differences, so drift in the machine's speed cancels out.
 */
async function delegation(iterations, { persisted = false, progressListener = false, approvals = false } = {}) {
  const rounds = 10
  const perRound = Math.ceil(iterations / rounds)
  const warm = 300
  const turns = warm + rounds * perRound
  const harness = await harnessWith([
    { when: { prompt: '^child task$' }, reply: [{ text: 'child done' }] },
    { when: { prompt: '^plain' }, reply: repeat(turns, () => [{ call: { tool: 'noop', args: {} } }, { text: 'ok' }]) },
    { when: { prompt: '^delegate' }, reply: repeat(turns, () => [{ call: { tool: 'subagent', args: { description: 'd', prompt: 'child task' } } }, { text: 'ok' }]) },
  ], { persisted })
  // Live progress as an editor follows it: one listener, which builds each run's channel.
  if (progressListener) harness.ctx.on('subagent/progress', () => {})
  // The approval broker as `dsh run` composes it, with no rule and nobody to ask (everything allowed).
  if (approvals) {
    await harness.plugin(ApprovalService, {})
    harness.ctx.approvals.setDefault('allow', 'bench')
  }
  const plain = await harness.agent()
  const delegating = await harness.agent()
  const measure = async (agent, prompt, count) => {
    const cpu = cpuMicros()
    const wall = performance.now()
    for (let i = 0; i < count; i++) {
      const result = await agent.followup(prompt)
      if (result.reason !== 'completed') throw new Error(`turn ended ${result.reason}: ${result.error}`)
    }
    return { cpu: (cpuMicros() - cpu) / count, wall: ((performance.now() - wall) * 1000) / count }
  }
  await measure(plain, 'plain', warm)
  await measure(delegating, 'delegate', warm)
  const samples = []
  for (let round = 0; round < rounds; round++) {
    const base = await measure(plain, 'plain', perRound)
    const deleg = await measure(delegating, 'delegate', perRound)
    samples.push({ base, deleg })
  }
  if (harness.ctx.agents.list().length !== 2) throw new Error('children leaked')
  await harness.dispose()
  const median = (values) => values.sort((a, b) => a - b)[values.length >> 1]
  const variant = persisted ? '_persisted' : progressListener ? '_progress' : approvals ? '_approvals' : ''
  return {
    [`plain_turn${variant}_cpu_us`]: median(samples.map((sample) => sample.base.cpu)),
    [`delegating_turn${variant}_cpu_us`]: median(samples.map((sample) => sample.deleg.cpu)),
    [`delegation_overhead${variant}_cpu_us`]: median(samples.map((sample) => sample.deleg.cpu - sample.base.cpu)),
    [`delegation_overhead${variant}_wall_us`]: median(samples.map((sample) => sample.deleg.wall - sample.base.wall)),
  }
}

/**
 * One parent turn whose single step delegates to `count` children at once: the mean of
 * several such turns (20 of 100 children, 5 of 1,000) after three warm-up turns and a full
 * GC, as the anchor benchmarks measure theirs. Garbage made by the measured turns is
 * collected while they run, and counted.
 */
async function fanout(count, { persisted = false } = {}) {
  const harness = await harnessWith([
    { when: { prompt: '^child' }, reply: [{ text: 'child done' }] },
    { when: { prompt: '^fan' }, reply: [{ calls: repeat(count, () => ({ tool: 'subagent', args: { description: 'd', prompt: 'child' } })) }, { text: 'ok' }] },
  ], { persisted })
  // Times the parent's turn only: creating and disposing the parent are not the fan-out.
  const fanOnce = async () => {
    const parent = await harness.agent()
    const cpu = cpuMicros()
    const wall = performance.now()
    const result = await parent.followup('fan out')
    const spent = { wall: performance.now() - wall, cpu: cpuMicros() - cpu }
    if (result.reason !== 'completed') throw new Error(`turn ended ${result.reason}: ${result.error}`)
    const results = parent.session.events().filter((event) => event.type === 'tool/result')
    if (results.length !== count || results.some((event) => event.result.isError)) throw new Error('a child failed')
    await parent.dispose()
    return spent
  }
  for (let i = 0; i < 3; i++) await fanOnce()
  gc()
  const turns = count >= 1000 ? 5 : 20
  let elapsed = 0
  let used = 0
  for (let i = 0; i < turns; i++) {
    const spent = await fanOnce()
    elapsed += spent.wall / turns
    used += spent.cpu / turns
  }
  if (harness.ctx.agents.list().length !== 0) throw new Error('children leaked')
  await harness.dispose()
  const variant = persisted ? '_persisted' : ''
  return { [`fanout_${count}${variant}_ms`]: elapsed, [`fanout_${count}${variant}_cpu_ms`]: used / 1000 }
}

/** Heap held by each of `count` children kept open at once (finished, not disposed). */
async function liveChildren(count) {
  const harness = await harnessWith([{ when: { prompt: '^child' }, reply: [{ text: 'child done' }] }])
  const parent = await harness.agent()
  const subagents = serviceInstance(harness.ctx.subagents)
  const startRun = () => subagents.start('spawn', { prompt: [text('child')], parent, signal: new AbortController().signal })
  // warm the code paths, then measure from a collected heap
  for (const run of await Promise.all(Array.from({ length: 200 }, startRun))) {
    await run.result
    await run.dispose()
  }
  gc()
  const before = process.memoryUsage().heapUsed
  const runs = await Promise.all(Array.from({ length: count }, startRun))
  await Promise.all(runs.map((run) => run.result))
  gc()
  const after = process.memoryUsage().heapUsed
  if (harness.ctx.agents.list().length !== count + 1) throw new Error('children not live')
  await Promise.all(runs.map((run) => run.dispose()))
  await harness.dispose()
  return { heap_per_live_child_kb: (after - before) / count / 1024 }
}

/**
 * Heap held by each of `count` delegations waiting in a tree's queue (cap 1, the one slot
 * held by a child that never answers), after a full GC: what a fan-out far over the cap costs
 * while it waits. A queued delegation has no agent, no session and no run yet.
 */
async function queuedChildren(count) {
  const harness = await createHarness({ script: [{ when: { prompt: '^blocker' }, reply: [{ text: 'never', delay_ms: 600_000 }] }, { reply: [{ text: 'done' }] }] })
  await harness.plugin(SubagentService, { tree: { maxConcurrent: 1, maxQueued: count } })
  await harness.plugin(SpawnPlugin, {})
  const parent = await harness.agent()
  const subagents = serviceInstance(harness.ctx.subagents)
  const stop = new AbortController()
  const blocker = await subagents.start('spawn', { prompt: [text('blocker')], parent, signal: stop.signal })
  const enqueue = () => subagents.start('spawn', { prompt: [text('queued child')], parent, signal: stop.signal, label: 'queued' }).catch(() => undefined)
  // warm the queue's code paths (these wait too and are abandoned with the rest)
  const warm = Array.from({ length: 200 }, enqueue)
  gc()
  const before = process.memoryUsage().heapUsed
  const waiting = Array.from({ length: count }, enqueue)
  gc()
  const after = process.memoryUsage().heapUsed
  if (harness.ctx.agents.list().length !== 2) throw new Error('a queued delegation started')
  stop.abort(new Error('bench over'))
  await Promise.all([...warm, ...waiting])
  blocker.cancel('bench over')
  await blocker.dispose()
  await harness.dispose()
  return { heap_per_queued_child_kb: (after - before) / count / 1024 }
}

/** Cost of one fork round trip (start, one child request, result, dispose) for a parent log of `events` events. */
async function fork(events) {
  const iterations = 400
  const harness = await harnessWith([{ when: { prompt: '^fork task' }, reply: [{ text: 'forked' }] }])
  const parent = await harness.agent()
  const { session } = parent
  const userMessage = { role: 'user', content: [text('earlier question')] }
  const assistantMessage = { role: 'assistant', content: [text('earlier answer')] }
  for (let turn = 1; session.length + 6 <= events; turn++) {
    session.append({ type: 'turn/start', turn })
    session.append({ type: 'step/start', step: 1 })
    session.append({ type: 'user/message', message: userMessage })
    session.append({ type: 'assistant/message', message: assistantMessage })
    session.append({ type: 'step/end', step: 1 })
    session.append({ type: 'turn/end', turn, reason: 'completed' })
  }
  // The service itself, as the subagent tool holds it: a call through a context pays for framework proxies.
  const subagents = serviceInstance(harness.ctx.subagents)
  const once = async () => {
    const run = await subagents.start('fork', { prompt: [text('fork task')], parent, signal: new AbortController().signal })
    const result = await run.result
    await run.dispose()
    if (result.stopReason !== 'completed') throw new Error(`fork ended ${result.stopReason}: ${result.diagnostic}`)
  }
  for (let i = 0; i < 100; i++) await once()
  gc()
  const cpu = cpuMicros()
  const wall = performance.now()
  for (let i = 0; i < iterations; i++) await once()
  const result = { [`fork_${events}_us`]: (cpuMicros() - cpu) / iterations, [`fork_${events}_wall_us`]: ((performance.now() - wall) * 1000) / iterations, [`fork_${events}_parent_events`]: session.length }
  await harness.dispose()
  return result
}

const scenarios = {
  delegation,
  delegationPersisted: (iterations) => delegation(iterations, { persisted: true }),
  delegationProgress: (iterations) => delegation(iterations, { progressListener: true }),
  delegationApprovals: (iterations) => delegation(iterations, { approvals: true }),
  fanout,
  fanoutPersisted: (count) => fanout(count, { persisted: true }),
  liveChildren,
  queuedChildren,
  fork,
}
const run = scenarios[name]
if (!run) {
  console.error(`unknown scenario ${name}; known: ${Object.keys(scenarios).join(', ')}`)
  process.exit(2)
}
const figures = await run(Number(arg))
process.stdout.write(`${JSON.stringify(figures)}\n`)
