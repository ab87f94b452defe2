import { mkdtemp, readFile, writeFile } from 'node:fs/promises'
import { tmpdir } from 'node:os'
import { join } from 'node:path'
import { afterEach, describe, expect, it } from 'vitest'
import { gateTool, type HarnessOptions } from '@dsh/testkit/harness'
import { createDelegationHarness, turnEnds, type DelegationHarness, cleanUp } from '@dsh/testkit/delegation'
import { text, textOf, type LlmRequest } from '@dsh/llm'
import type { Agent } from '@dsh/agent'
import { SubagentError, parseDescriptor, type ContinuableRequest, type SubagentProvider } from '@dsh/subagent'
import { SpawnPlugin } from '@dsh/subagent-spawn'

let harness: DelegationHarness | undefined
let dir: string | undefined
afterEach(async () => {
  await cleanUp(harness, dir)
  harness = dir = undefined
})

/** Parent and children play one script; each session is bound to its rule by its own prompt. */
const SCRIPT: HarnessOptions['script'] = [
  { when: { prompt: '^research' }, reply: [{ text: 'child turn one' }, { text: 'child turn two' }, { text: 'child turn three' }] },
  { when: { prompt: '^slow' }, reply: [{ delay_ms: 60_000, text: 'never' }, { text: 'resumed after the interrupt' }] },
  { when: { prompt: '^hold on' }, reply: [{ call: { tool: 'gate', args: {} } }, { text: 'released' }] },
  { reply: [{ text: 'parent ack 1' }, { text: 'parent ack 2' }, { text: 'parent ack 3' }, { text: 'parent ack 4' }, { text: 'parent ack 5' }] },
]

async function start(options: { storage?: boolean; sessionDir?: string } = {}): Promise<{ harness: DelegationHarness; requests: LlmRequest[] }> {
  if (options.storage !== false) dir ??= options.sessionDir ?? (await mkdtemp(join(tmpdir(), 'dsh-continuable-')))
  const h = (harness = await createDelegationHarness({ script: SCRIPT, sessionDir: options.storage === false ? false : dir, plugins: [[SpawnPlugin, {}]] }))
  return { harness: h, requests: h.requests }
}

const request = (parent: Agent, prompt: string, extra: Partial<ContinuableRequest> = {}): ContinuableRequest => ({ prompt: [text(prompt)], parent, ...extra })


function lastAnswer(agent: Agent): string | undefined {
  const answers = agent.session.ownEvents().flatMap((event) => (event.type === 'assistant/message' ? [textOf(event.message.content.filter((b) => b.type === 'text'))] : []))
  return answers.at(-1)
}

function userTexts(agent: Agent): string[] {
  return agent.session.ownEvents().flatMap((event) => (event.type === 'user/message' ? [textOf(event.message.content)] : []))
}

async function rejection(promise: Promise<unknown>): Promise<SubagentError> {
  const error = await promise.then(() => undefined, (caught: unknown) => caught)
  expect(error).toBeInstanceOf(SubagentError)
  return error as SubagentError
}

describe('continuable spawn children', () => {
  it('a started child settles, its idle parent gets one notice turn, and a follow-up sees the earlier turn', async () => {
    const { harness: h, requests } = await start()
    const parent = await h.agent()
    const { childId, messageId } = await h.ctx.subagents.startContinuable({ provider: 'spawn', label: 'research', request: request(parent, 'research the repo'), signal: new AbortController().signal })
    expect(messageId).toMatch(/^msg-/)
    const child = h.ctx.agents.get(childId)!
    expect(child.session.header).toMatchObject({ parentSession: parent.id, origin: 'subagent', delegationDepth: 1, provider: 'spawn', label: 'research' })
    expect(parseDescriptor(child.session.header.descriptor)).toEqual({ descriptor: { version: 1, mode: 'continuable', provider: 'spawn', label: 'research' } })

    await turnEnds(parent, 1)
    const notice = userTexts(parent)
    expect(notice).toHaveLength(1)
    expect(notice[0]).toContain(`Subagent ${childId} finished its turn`)
    expect(notice[0]).toContain('child turn one')

    await h.ctx.subagents.followup(parent, childId, 'research more')
    await turnEnds(child, 2)
    // The child's second request carries its first turn.
    const childRequests = requests.filter((r) => r.origin.sessionId === childId)
    expect(childRequests).toHaveLength(2)
    expect(childRequests[1].messages.toArray().map((m) => textOf(m.content.filter((b) => b.type === 'text')))).toEqual(['research the repo', 'child turn one', 'research more'])
    await turnEnds(parent, 2)
    expect(userTexts(parent)[1]).toContain('child turn two')
    expect(await h.ctx.subagents.listChildren(parent.id)).toEqual([{ childId, parentId: parent.id, depth: 1, provider: 'spawn', label: 'research', state: 'idle', turns: 2, local: true }])
  })

  it('after a restart a follow-up rebuilds the child from its file with every earlier turn in context', async () => {
    const first = await start()
    const parent = await first.harness.agent()
    const parentId = parent.id
    const { childId } = await first.harness.ctx.subagents.startContinuable({ provider: 'spawn', label: 'research', request: request(parent, 'research the repo'), signal: new AbortController().signal })
    await turnEnds(parent, 1)
    await first.harness.dispose()
    expect(first.harness.ctx.get('agents')?.list() ?? []).toEqual([])

    const sessionDir = dir!
    dir = undefined
    const second = await start({ sessionDir })
    dir = sessionDir
    const resumed = await second.harness.ctx.agents.create({ sessionId: parentId })
    await second.harness.ctx.subagents.followup(resumed, childId, 'what did you find?')
    const child = second.harness.ctx.agents.get(childId)!
    expect(child.depth).toBe(1)
    await turnEnds(child, 2)
    const childRequest = second.requests.find((r) => r.origin.sessionId === childId)!
    expect(childRequest.messages.toArray().map((m) => textOf(m.content.filter((b) => b.type === 'text')))).toEqual(['research the repo', 'child turn one', 'what did you find?'])
    // The script continued where the child's log left off.
    expect(lastAnswer(child)).toBe('child turn two')
    await turnEnds(resumed, 2)
    const [listed] = await second.harness.ctx.subagents.listChildren(parentId)
    expect(listed).toMatchObject({ childId, turns: 2, state: 'idle' })
  })

  it('only the direct parent may deliver, and unknown ids are not resumable; neither creates anything', async () => {
    const { harness: h } = await start()
    const parent = await h.agent()
    const other = await h.agent()
    const { childId } = await h.ctx.subagents.startContinuable({ provider: 'spawn', label: 'research', request: request(parent, 'research the repo'), signal: new AbortController().signal })
    await turnEnds(parent, 1)
    const sessionsBefore = h.ctx.sessions.list().length
    expect((await rejection(h.ctx.subagents.followup(other, childId, 'hi'))).code).toBe('UNAUTHORIZED')
    const unknown = await rejection(h.ctx.subagents.followup(parent, 'no-such-child', 'hi'))
    expect(unknown.code).toBe('NOT_RESUMABLE')
    expect(unknown.message).toContain('no-such-child')
    expect(h.ctx.sessions.list().length).toBe(sessionsBefore)
    expect(h.ctx.agents.get(childId)!.session.ownEvents().filter((e) => e.type === 'turn/start')).toHaveLength(1)
  })

  it('a stored child whose descriptor has an unknown version is refused naming the child, and its file is untouched', async () => {
    const { harness: h } = await start()
    const parent = await h.agent()
    const odd = h.ctx.sessions.create({ parentSession: parent.id, origin: 'subagent', delegationDepth: 1, descriptor: { version: 99, mode: 'continuable', provider: 'spawn', label: 'x' } })
    odd.append({ type: 'turn/start', turn: 1 })
    odd.append({ type: 'turn/end', turn: 1, reason: 'completed' })
    await h.ctx.sessions.release(odd)
    const before = await h.ctx.sessions.readStored(odd.id)
    const error = await rejection(h.ctx.subagents.followup(parent, odd.id, 'hi'))
    expect(error.code).toBe('NOT_RESUMABLE')
    expect(error.message).toContain(odd.id)
    expect(error.message).toContain('version 99')
    expect(await h.ctx.sessions.readStored(odd.id)).toEqual(before)
    expect(h.ctx.agents.get(odd.id)).toBeUndefined()
  })

  it('refuses before anything exists: a provider that cannot continue, no storage, a reserved id already stored', async () => {
    const { harness: h } = await start()
    const parent = await h.agent()
    const oneShotOnly: SubagentProvider = { name: 'one-shot', capabilities: { outputSchema: false, depthLimit: false, toolFilter: false, persona: false }, inheritsParentContext: false, start: () => Promise.reject(new Error('not called')) }
    h.ctx.subagents.registerProvider(oneShotOnly)
    const signal = new AbortController().signal
    expect((await rejection(h.ctx.subagents.startContinuable({ provider: 'one-shot', label: 'x', request: request(parent, 'research'), signal }))).code).toBe('UNSUPPORTED_CAPABILITY')
    expect((await rejection(h.ctx.subagents.startContinuable({ provider: 'spawn', label: 'x', childId: parent.id, request: request(parent, 'research'), signal }))).code).toBe('DUPLICATE_CHILD')
    expect(h.ctx.agents.list()).toEqual([parent])
    expect(h.ctx.sessions.list().map((s) => s.id)).toEqual([parent.id])

    await h.dispose()
    const bare = await start({ storage: false })
    const root = await bare.harness.agent()
    expect((await rejection(bare.harness.ctx.subagents.startContinuable({ provider: 'spawn', label: 'x', request: request(root, 'research'), signal }))).code).toBe('PERSISTENCE_UNAVAILABLE')
    expect(bare.harness.ctx.agents.list()).toEqual([root])
  })

  it('interrupting stops the running turn and leaves the child resumable; only ancestors may interrupt', async () => {
    const { harness: h } = await start()
    const parent = await h.agent()
    const stranger = await h.agent()
    const { childId } = await h.ctx.subagents.startContinuable({ provider: 'spawn', label: 'slow', request: request(parent, 'slow work'), signal: new AbortController().signal })
    const child = h.ctx.agents.get(childId)!
    // The first step may have started before startContinuable's caller resumed.
    if (!child.session.ownEvents().some((event) => event.type === 'step/start')) {
      await new Promise<void>((resolve) => {
        const stop = child.session.subscribe((update) => {
          if (update.type === 'step/start') {
            stop()
            resolve()
          }
        })
      })
    }
    await expect(h.ctx.subagents.interrupt(childId, { kind: 'ancestor', agent: stranger })).rejects.toMatchObject({ code: 'UNAUTHORIZED' })
    await expect(h.ctx.subagents.interrupt(childId, { kind: 'ancestor', agent: child })).rejects.toMatchObject({ code: 'UNAUTHORIZED' })
    await h.ctx.subagents.interrupt(childId, { kind: 'ancestor', agent: parent })
    await turnEnds(child, 1)
    expect(child.session.ownEvents().find((e) => e.type === 'turn/end')).toMatchObject({ reason: 'aborted' })
    await turnEnds(parent, 1)
    expect(userTexts(parent)[0]).toContain(`Subagent ${childId} was stopped`)
    await h.ctx.subagents.followup(parent, childId, 'go on')
    await turnEnds(child, 2)
    expect(child.session.ownEvents().filter((e) => e.type === 'turn/end').at(-1)).toMatchObject({ reason: 'completed' })
  })

  it('disposing the parent disposes its continuable child', async () => {
    const { harness: h } = await start()
    const parent = await h.agent()
    const { childId } = await h.ctx.subagents.startContinuable({ provider: 'spawn', label: 'slow', request: request(parent, 'slow work'), signal: new AbortController().signal })
    const child = h.ctx.agents.get(childId)!
    await parent.dispose()
    expect(child.status).toBe('disposed')
    expect(h.ctx.agents.list()).toEqual([])
  })

  it('a corrupt child file is not resumable, naming the child; nothing starts and the file is untouched', async () => {
    const { harness: h } = await start()
    const parent = await h.agent()
    const id = 'broken-child'
    const file = join(dir!, `${id}.jsonl`)
    await writeFile(file, '{"kind":"header","version":1,"header":{"id":"broken-child"\n')
    const error = await rejection(h.ctx.subagents.followup(parent, id, 'hi'))
    expect(error.code).toBe('NOT_RESUMABLE')
    expect(error.message).toContain(`subagent ${id} cannot be reached: its session cannot be read`)
    expect(await readFile(file, 'utf8')).toBe('{"kind":"header","version":1,"header":{"id":"broken-child"\n')
    expect(h.ctx.agents.list()).toEqual([parent])
  })

  it('a notice for a parent that is being disposed is dropped without blocking its teardown', async () => {
    const { harness: h } = await start()
    const parent = await h.agent()
    const { childId } = await h.ctx.subagents.startContinuable({ provider: 'spawn', label: 'slow', request: request(parent, 'slow work'), signal: new AbortController().signal })
    const child = h.ctx.agents.get(childId)!
    const parentEvents = parent.session.length
    // The parent's disposal cancels the child's turn; its settlement finds the parent going away.
    await parent.dispose()
    expect(child.status).toBe('disposed')
    expect(child.session.ownEvents().find((e) => e.type === 'turn/end')).toMatchObject({ reason: 'aborted' })
    expect(parent.session.length).toBe(parentEvents)
  })

  it('two children settling while the parent is busy reach it together at its next step', async () => {
    const { harness: h } = await start()
    const parent = await h.agent()
    const gate = gateTool(h)
    const busy = parent.followup('hold on')
    const first = await h.ctx.subagents.startContinuable({ provider: 'spawn', label: 'one', request: request(parent, 'research one'), signal: new AbortController().signal })
    const second = await h.ctx.subagents.startContinuable({ provider: 'spawn', label: 'two', request: request(parent, 'research two'), signal: new AbortController().signal })
    await turnEnds(h.ctx.agents.get(first.childId)!, 1)
    await turnEnds(h.ctx.agents.get(second.childId)!, 1)
    await gate.entered
    gate.release()
    await busy
    await parent.whenIdle()
    // Both notices joined one step of the busy turn: no extra turn was started for them.
    const turns = parent.session.ownEvents().filter((e) => e.type === 'turn/start')
    expect(turns).toHaveLength(1)
    const stepTwoInput = userTexts(parent).slice(1)
    expect(stepTwoInput).toHaveLength(2)
    expect(stepTwoInput.join('\n')).toContain(`Subagent ${first.childId} finished its turn`)
    expect(stepTwoInput.join('\n')).toContain(`Subagent ${second.childId} finished its turn`)
  })
})
