import { mkdtemp, readFile, writeFile } from 'node:fs/promises'
import { tmpdir } from 'node:os'
import { join } from 'node:path'
import { Logger, type Exporter } from 'cordis'
import { afterEach, describe, expect, it } from 'vitest'
import { gateTool, type HarnessOptions } from '@dsh/testkit/harness'
import { createDelegationHarness, type DelegationHarness, cleanUp } from '@dsh/testkit/delegation'
import { text, textOf, type LlmRequest } from '@dsh/llm'
import type { Agent } from '@dsh/agent'
import type { ContinuableRequest } from '@dsh/subagent'
import { SpawnPlugin } from '@dsh/subagent-spawn'

let harness: DelegationHarness | undefined
let dir: string | undefined
afterEach(async () => {
  await cleanUp(harness, dir)
  harness = dir = undefined
})

const SCRIPT: HarnessOptions['script'] = [
  { when: { prompt: '^slow' }, reply: [{ delay_ms: 60_000, text: 'never' }, { text: 'after the cancel' }, { text: 'more' }] },
  { when: { prompt: '^fifo' }, reply: [{ call: { tool: 'gate', args: {} } }, { text: 'first turn' }, { text: 'answer 2' }, { text: 'answer 3' }, { text: 'answer 4' }] },
  { when: { prompt: '^research' }, reply: [{ text: 'child turn one' }, { text: 'child turn two' }] },
  { reply: Array.from({ length: 8 }, (_, index) => ({ text: `parent ack ${index + 1}` })) },
]

/** A harness with session files in `dir` (a fresh one unless given, to restart over the same files). */
async function start(sessionDir?: string): Promise<{ harness: DelegationHarness; requests: LlmRequest[]; logs: string[] }> {
  dir = sessionDir ?? (await mkdtemp(join(tmpdir(), 'dsh-continuable-')))
  const h = (harness = await createDelegationHarness({ script: SCRIPT, sessionDir: dir, plugins: [[SpawnPlugin, {}]] }))
  const logs: string[] = []
  const exporter: Exporter = { colors: 0, levels: { default: 3 }, export: (message) => logs.push(Logger.format(exporter, message)) }
  h.ctx.logger.exporter(exporter)
  return { harness: h, requests: h.requests, logs }
}

/** Dispose the harness but keep its session files for the next `start`. */
async function restart(): Promise<string> {
  const kept = dir!
  await harness!.dispose()
  harness = undefined
  return kept
}

const request = (parent: Agent, prompt: string, extra: Partial<ContinuableRequest> = {}): ContinuableRequest => ({ prompt: [text(prompt)], parent, ...extra })
const signal = () => new AbortController().signal

function sessionEvent(agent: Agent, type: string, count = 1): Promise<void> {
  const seen = () => agent.session.ownEvents().filter((event) => event.type === type).length
  if (seen() >= count) return Promise.resolve()
  return new Promise((resolve) => {
    const stop = agent.session.subscribe((update) => {
      if (update.type === type && seen() >= count) {
        stop()
        resolve()
      }
    })
  })
}

const turnEnds = (agent: Agent, count: number) => sessionEvent(agent, 'turn/end', count)
const userTexts = (agent: Agent) => agent.session.ownEvents().flatMap((event) => (event.type === 'user/message' ? [textOf(event.message.content)] : []))
const turnEndReasons = (agent: Agent) => agent.session.ownEvents().flatMap((event) => (event.type === 'turn/end' ? [event.reason] : []))

describe('continuable children: guarantees', () => {
  it('stopping a parent\'s work drops the child\'s queued follow-ups, ends its turn aborted without a notice, and leaves it resumable', async () => {
    const { harness: h, logs } = await start()
    const parent = await h.agent()
    const { childId } = await h.ctx.subagents.startContinuable({ provider: 'spawn', label: 'slow', request: request(parent, 'slow work'), signal: signal() })
    await h.ctx.subagents.followup(parent, childId, 'queued one')
    await h.ctx.subagents.followup(parent, childId, 'queued two')
    const child = h.ctx.agents.get(childId)!
    await sessionEvent(child, 'step/start')

    await h.ctx.subagents.continuation.killAll(parent.id, 'cancelled: by the test')
    expect(h.ctx.subagents.continuation.hasLive(parent.id)).toBe(false)
    expect(turnEndReasons(child)).toEqual(['aborted'])
    expect(userTexts(child)).toEqual(['slow work'])
    expect(logs.join('\n')).toContain(`2 queued message(s) to subagent ${childId} were dropped: cancelled: by the test`)
    await parent.whenIdle()
    // No notice reached the parent, so no turn of its was started after the cancel.
    expect(parent.session.ownEvents()).toEqual([])
    expect(child.status).toBe('idle')

    // Still resumable: the next message runs as a normal turn, and the parent hears of it.
    await h.ctx.subagents.followup(parent, childId, 'after the cancel')
    await turnEnds(parent, 1)
    expect(userTexts(child)).toEqual(['slow work', 'after the cancel'])
    expect(turnEndReasons(child)).toEqual(['aborted', 'completed'])
    expect(userTexts(parent)[0]).toContain(`Subagent ${childId} finished its turn`)
  })

  it('several follow-ups sent while the child is busy run in the order they were accepted, one turn each', async () => {
    const { harness: h } = await start()
    const parent = await h.agent()
    const gate = gateTool(h)
    const { childId } = await h.ctx.subagents.startContinuable({ provider: 'spawn', label: 'fifo', request: request(parent, 'fifo work'), signal: signal() })
    await gate.entered
    for (const message of ['message 2', 'message 3', 'message 4']) await h.ctx.subagents.followup(parent, childId, message)
    gate.release()
    const child = h.ctx.agents.get(childId)!
    await turnEnds(child, 4)
    const turns: string[][] = []
    for (const event of child.session.ownEvents()) {
      if (event.type === 'turn/start') turns.push([])
      else if (event.type === 'user/message') turns.at(-1)!.push(textOf(event.message.content))
    }
    expect(turns).toEqual([['fifo work'], ['message 2'], ['message 3'], ['message 4']])
  })

  it('after a restart a stranger cannot deliver to the cold child: nothing is rebuilt and its file is unchanged', async () => {
    const first = await start()
    const parent = await first.harness.agent()
    const { childId } = await first.harness.ctx.subagents.startContinuable({ provider: 'spawn', label: 'research', request: request(parent, 'research the repo'), signal: signal() })
    await turnEnds(parent, 1)
    const kept = await restart()
    const file = join(kept, `${childId}.jsonl`)
    const before = await readFile(file, 'utf8')

    const second = await start(kept)
    const stranger = await second.harness.agent()
    await expect(second.harness.ctx.subagents.followup(stranger, childId, 'tell me')).rejects.toMatchObject({ code: 'UNAUTHORIZED', message: expect.stringContaining(`not the parent of subagent ${childId}`) })
    expect(second.harness.ctx.agents.get(childId)).toBeUndefined()
    expect(second.harness.ctx.sessions.get(childId)).toBeUndefined()
    expect(await readFile(file, 'utf8')).toBe(before)
  })

  it('model, persona and tool filter survive a cold resume', async () => {
    const first = await start()
    const childScript = join(dir!, 'child.yml')
    await writeFile(childScript, '- reply:\n    - text: "first answer"\n    - text: "second answer"\n')
    const parent = await first.harness.agent()
    gateTool(first.harness)
    const { childId } = await first.harness.ctx.subagents.startContinuable({
      provider: 'spawn',
      label: 'picky',
      request: request(parent, 'work carefully', { agentOptions: { model: `scripted:${childScript}` }, persona: 'You are a meticulous archivist.', toolFilter: { allow: ['gate'] } }),
      signal: signal(),
    })
    await turnEnds(parent, 1)
    const kept = await restart()

    const second = await start(kept)
    gateTool(second.harness)
    second.harness.ctx.tools.register({ name: 'other', description: 'another tool', parameters: { type: 'object' }, execute: () => 'other ran' })
    const resumed = await second.harness.ctx.agents.create({ sessionId: parent.id })
    await second.harness.ctx.subagents.followup(resumed, childId, 'again')
    const child = second.harness.ctx.agents.get(childId)!
    await turnEnds(child, 2)
    const childRequest = second.requests.find((r) => r.origin.sessionId === childId)!
    expect(childRequest.model).toBe(childScript)
    expect(childRequest.system).toContain('You are a meticulous archivist.')
    expect(childRequest.tools.map((tool) => tool.name)).toEqual(['gate'])
    expect(child.options).toMatchObject({ model: `scripted:${childScript}`, persona: 'You are a meticulous archivist.' })
    expect(userTexts(child).at(-1)).toBe('again')
  })

  it('a reserved id that is only stored (not live) is a duplicate, and nothing is created', async () => {
    const { harness: h } = await start()
    const parent = await h.agent()
    const stored = h.ctx.sessions.create({ id: 'kept-child', origin: 'test' })
    await h.ctx.sessions.release(stored)
    expect(h.ctx.sessions.get('kept-child')).toBeUndefined()
    const before = await readFile(join(dir!, 'kept-child.jsonl'), 'utf8')
    await expect(h.ctx.subagents.startContinuable({ provider: 'spawn', label: 'x', childId: 'kept-child', request: request(parent, 'research'), signal: signal() }))
      .rejects.toMatchObject({ code: 'DUPLICATE_CHILD', message: expect.stringContaining('kept-child is already stored') })
    expect(h.ctx.agents.list()).toEqual([parent])
    expect(await readFile(join(dir!, 'kept-child.jsonl'), 'utf8')).toBe(before)
  })

  it('a notice for a parent being disposed is dropped and logged, and the manager forgets the parent', async () => {
    const { harness: h, logs } = await start()
    const parent = await h.agent()
    const { childId } = await h.ctx.subagents.startContinuable({ provider: 'spawn', label: 'slow', request: request(parent, 'slow work'), signal: signal() })
    const child = h.ctx.agents.get(childId)!
    await sessionEvent(child, 'step/start')
    expect(h.ctx.tasks.notices.held()).toEqual([parent.id])
    await parent.dispose()
    expect(turnEndReasons(child)).toEqual(['aborted'])
    expect(logs.join('\n')).toContain(`a subagent notice for ${parent.id} was dropped: the parent is disposing`)
    expect(h.ctx.tasks.notices.held()).toEqual([])
  })

  it('every disposed parent is forgotten by the manager: nothing of it stays held', async () => {
    const { harness: h } = await start()
    const parents: Agent[] = []
    for (let index = 0; index < 3; index++) {
      const parent = await h.agent()
      parents.push(parent)
      await h.ctx.subagents.startContinuable({ provider: 'spawn', label: 'research', request: request(parent, 'research the repo'), signal: signal() })
      await turnEnds(parent, 1)
    }
    expect(h.ctx.tasks.notices.held().sort()).toEqual(parents.map((p) => p.id).sort())
    for (const parent of parents) await parent.dispose()
    expect(h.ctx.tasks.notices.held()).toEqual([])
  })
})
