import { mkdtempSync, readFileSync, readdirSync, rmSync, writeFileSync } from 'node:fs'
import { tmpdir } from 'node:os'
import { join } from 'node:path'
import { afterEach, describe, expect, it } from 'vitest'
import type { LlmAdapter } from '@dsh/llm'
import type { Script } from '@dsh/llm-scripted'
import { isReplayAdapter } from '@dsh/llm-replay'
import { createStack, normalisedLogs, type Stack } from './run-stack.js'

/** A parent that starts three concurrent spawn children (one answers, one runs out of tokens, one fails), then a fork child. */
const NESTED: Script = [
  { when: { prompt: '^alpha' }, reply: [{ text: 'alpha done', delay_ms: 30 }] },
  { when: { prompt: '^beta' }, reply: [{ text: 'beta partial', finish: 'length', delay_ms: 10 }] },
  { when: { prompt: '^gamma' }, reply: [{ error: 'gamma exploded' }] },
  { when: { prompt: '^fork' }, reply: [{ text: 'the fork agrees' }] },
  {
    when: { depth: 0 },
    reply: [
      {
        calls: [
          { tool: 'subagent', args: { description: 'a', prompt: 'alpha: list the risks' } },
          { tool: 'subagent', args: { description: 'b', prompt: 'beta: count the files' } },
          { tool: 'subagent', args: { description: 'c', prompt: 'gamma: try the impossible' } },
        ],
      },
      { call: { tool: 'subagent_fork', args: { description: 'f', prompt: 'fork: check the answers' } } },
      { text: 'summary: {{tool_results}}' },
    ],
  },
]

const stacks: Stack[] = []
afterEach(async () => {
  await Promise.all(stacks.splice(0).map((stack) => stack.dispose()))
})

async function stack(options: Parameters<typeof createStack>[0]): Promise<Stack> {
  const created = await createStack(options)
  stacks.push(created)
  return created
}

function problems(target: Stack): string[] {
  const adapter = target.ctx.llm.getAdapter('replay')
  return isReplayAdapter(adapter) ? adapter.problems() : ['no replay adapter']
}

async function record(): Promise<{ dir: string; logs: Record<string, unknown[]> }> {
  const dir = mkdtempSync(join(tmpdir(), 'dsh-replay-'))
  const recording = await stack({ model: 'scripted:test', script: NESTED, record: dir })
  expect(await recording.run('review the plan')).toEqual({ reason: 'completed' })
  return { dir, logs: normalisedLogs(recording.sessions) }
}

/**
 * Holds each child's model requests back until the child before it in `order` (by its
 * prompt) has reached the model, so the children reach it in that order, however busy the
 * machine: a replay that bound by first call would give each child a sibling's recording.
 */
function reachModelIn(order: string[]) {
  const reached = order.map(() => {
    let resolve!: () => void
    const promise = new Promise<void>((settle) => (resolve = settle))
    return { promise, resolve }
  })
  return (resolved: { adapter: LlmAdapter; model: string; spec: string }) => ({
    ...resolved,
    adapter: {
      name: resolved.adapter.name,
      async *stream(request: Parameters<LlmAdapter['stream']>[0]) {
        const first = request.messages.at(0)
        const text = first?.role === 'user' && first.content[0]?.type === 'text' ? first.content[0].text : ''
        const position = order.findIndex((prefix) => text.startsWith(prefix))
        if (position > 0) await reached[position - 1].promise
        if (position >= 0) reached[position].resolve()
        yield* resolved.adapter.stream(request)
      },
    },
  })
}

describe('replay binds each session to its recording by lineage', () => {
  it('a run with three concurrent children and a fork child replays twenty times with identical logs, whatever order the children reach the model in', async () => {
    const { dir, logs } = await record()
    expect(readdirSync(dir).sort()).toEqual(['root.call_1.jsonl', 'root.call_2.jsonl', 'root.call_3.jsonl', 'root.call_4.jsonl', 'root.jsonl'])
    const orders = [
      ['alpha', 'beta', 'gamma'],
      ['gamma', 'beta', 'alpha'],
      ['beta', 'gamma', 'alpha'],
      ['gamma', 'alpha', 'beta'],
    ]
    for (let round = 0; round < 20; round++) {
      const replay = await stack({ model: `replay:${dir}`, intercept: reachModelIn(orders[round % orders.length]) })
      expect(await replay.run('review the plan')).toEqual({ reason: 'completed' })
      expect(normalisedLogs(replay.sessions)).toEqual(logs)
      expect(problems(replay)).toEqual([])
      await replay.dispose()
    }
  })

  it('the replayed children end as recorded: completed, max-tokens, error', async () => {
    const { dir } = await record()
    const replay = await stack({ model: `replay:${dir}` })
    await replay.run('review the plan')
    const ends = Object.fromEntries(
      replay.sessions.filter((session) => session.header.parentSession !== undefined).map((session) => {
        const end = session.ownEvents().find((event) => event.type === 'turn/end')
        return [session.ownPrompt, end?.type === 'turn/end' ? [end.reason, end.error] : undefined]
      }),
    )
    expect(ends).toEqual({
      'alpha: list the risks': ['completed', undefined],
      'beta: count the files': ['max-tokens', undefined],
      'gamma: try the impossible': ['error', 'gamma exploded'],
      'fork: check the answers': ['completed', undefined],
    })
  })

  it('one word changed in a child\'s prompt fails the child with the divergence message naming the session, the call and the field', async () => {
    const { dir } = await record()
    const root = join(dir, 'root.jsonl')
    writeFileSync(root, readFileSync(root, 'utf8').replace('beta: count the files', 'beta: count the folders'))
    const replay = await stack({ model: `replay:${dir}` })
    await replay.run('review the plan')
    const [first] = problems(replay)
    expect(first).toBe(`replay diverged: session root.call_2, call 0: prompt differs: recorded "beta: count the files", live "beta: count the folders" (${join(dir, 'root.call_2.jsonl')}:1)`)
  })

  it('a changed system prompt fails the root\'s first call naming the field and both values, shortened', async () => {
    const { dir } = await record()
    const root = join(dir, 'root.jsonl')
    writeFileSync(root, readFileSync(root, 'utf8').replace('You are dsh, a careful software agent.', 'You are dsh, a reckless software agent.'))
    const replay = await stack({ model: `replay:${dir}` })
    expect(await replay.run('review the plan')).toMatchObject({ reason: 'error' })
    expect(problems(replay)[0]).toMatch(/^replay diverged: session root, call 0: system differs: recorded "You are dsh, a reckless software agent\..*", live "You are dsh, a careful software agent\..*" \(.*root\.jsonl:2\)$/)
  })

  it('recorded calls a run never made are a problem naming the session and the line', async () => {
    const { dir } = await record()
    const replay = await stack({ model: `replay:${dir}` })
    // The same recording, but the run stops after the parent's first step.
    await replay.ctx.plugin({ inject: ['agents'], apply: () => {} })
    const agents = replay.ctx.agents
    const agent = await agents.create({ meta: { origin: 'test' }, agentOptions: { maxSteps: 1 } } as Parameters<typeof agents.create>[0])
    await agent.followup('review the plan')
    await agent.dispose()
    expect(problems(replay)).toContainEqual(expect.stringMatching(/^replay: session root made 1 of its 3 recorded calls; the next was never made \(.*root\.jsonl:4\)$/))
    expect(problems(replay)).toContainEqual(expect.stringMatching(/^replay: no live session had the lineage of recording root\.call_4 /))
  })
})

describe('a cancelled call', () => {
  it('of a root replays as a cancelled turn at once: the replay does not wait for a Ctrl-C nobody sends', async () => {
    const dir = mkdtempSync(join(tmpdir(), 'dsh-replay-'))
    const recording = await stack({ model: 'scripted:test', script: [{ reply: [{ text: 'never', delay_ms: 60_000 }] }], record: dir })
    const agent = await recording.ctx.agents.create({ meta: { origin: 'test' } })
    const turn = agent.followup('wait forever')
    // The request line is written when the call starts.
    while (!readFileSync(join(dir, 'root.jsonl'), { encoding: 'utf8', flag: 'a+' }).includes('"request"')) await new Promise((resolve) => setTimeout(resolve, 10))
    agent.cancel(new Error('Ctrl-C'))
    expect((await turn).reason).toBe('aborted')
    await agent.dispose()
    expect(readFileSync(join(dir, 'root.jsonl'), 'utf8')).toContain('"end":"aborted"')

    const replay = await stack({ model: `replay:${dir}` })
    expect(await replay.run('wait forever')).toEqual({ reason: 'aborted' })
    expect(problems(replay)).toEqual([])
  })
})

describe('a recording that cannot be replayed is refused before any session, naming the file and line', () => {
  it('a missing directory', async () => {
    const replay = await stack({ model: 'replay:/nonexistent/recording' })
    await expect(replay.ctx.llm.resolve().adapter.prepare!('/nonexistent/recording')).rejects.toMatchObject({ code: 'INVALID_RECORDING', message: expect.stringContaining('/nonexistent/recording is not a directory of recordings') })
  })

  it('a truncated file', async () => {
    const { dir } = await record()
    const file = join(dir, 'root.call_1.jsonl')
    const text = readFileSync(file, 'utf8')
    writeFileSync(file, text.slice(0, text.length - 20))
    const replay = await stack({ model: `replay:${dir}` })
    await expect(replay.ctx.llm.resolve().adapter.prepare!(dir)).rejects.toMatchObject({ code: 'INVALID_RECORDING', message: expect.stringContaining(`${file}:3: the last line does not end with a newline (the file is truncated)`) })
  })

  it('a hand edit that breaks a line\'s shape', async () => {
    const { dir } = await record()
    const file = join(dir, 'root.jsonl')
    writeFileSync(file, readFileSync(file, 'utf8').replace('"type":"finish","reason":"tool-calls"', '"type":"finish","reason":"tired"'))
    const replay = await stack({ model: `replay:${dir}` })
    await expect(replay.ctx.llm.resolve().adapter.prepare!(dir)).rejects.toMatchObject({ message: expect.stringMatching(new RegExp(`${file}:3: call 0: response.chunks\\[\\d+\\]: reason must be one of stop, tool-calls, length, content-filter`)) })
  })

  it('a recording from another format version', async () => {
    const { dir } = await record()
    const file = join(dir, 'root.jsonl')
    writeFileSync(file, readFileSync(file, 'utf8').replace('"version":1', '"version":2'))
    const replay = await stack({ model: `replay:${dir}` })
    await expect(replay.ctx.llm.resolve().adapter.prepare!(dir)).rejects.toMatchObject({ message: expect.stringContaining(`${file}:1: recording format version 2 is not supported; this dsh reads version 1`) })
  })

  it('more live sessions than recordings: the extra session fails naming the file it looked for, and no other model answers it', async () => {
    const { dir } = await record()
    rmSync(join(dir, 'root.call_3.jsonl'))
    const replay = await stack({ model: `replay:${dir}` })
    await replay.run('review the plan')
    expect(problems(replay)).toContainEqual(`replay: live session ${replay.sessions.find((session) => session.ownPrompt?.startsWith('gamma'))!.id} has lineage root.call_3, but there is no recording ${join(dir, 'root.call_3.jsonl')}; the run started a session the recording does not have (record the run again if that is intended)`)
  })
})
