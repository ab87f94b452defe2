import { describe, expect, it } from 'vitest'
import { Context } from 'cordis'
import { Session, SessionStore } from '@dsh/session'
import { userText } from '@dsh/llm'

async function store() {
  const ctx = new Context()
  await ctx.plugin(SessionStore)
  return ctx.sessions
}

function completeTurn(session: Session, turn: number, prompt: string, answer: string) {
  session.append({ type: 'turn/start', turn })
  session.append({ type: 'step/start', step: 1 })
  session.append({ type: 'user/message', message: userText(prompt) })
  session.append({ type: 'assistant/message', message: { role: 'assistant', content: [{ type: 'text', text: answer }] } })
  session.append({ type: 'step/end', step: 1 })
  session.append({ type: 'turn/end', turn, reason: 'completed' })
}

describe('the session log', () => {
  it('a header holding an own "__proto__" key keeps it as data: it never becomes the header\'s prototype', () => {
    const header = JSON.parse('{"id":"s1","createdAt":"2026-12-01T00:00:00.000Z","cwd":"/work","__proto__":{"maxDepth":-3,"seedLength":5}}')
    const session = new Session(header)
    expect(Object.getPrototypeOf(session.header)).toBe(Object.prototype)
    expect(session.header.maxDepth).toBeUndefined()
    expect(session.header.seedLength).toBeUndefined()
    expect(Object.keys(session.header)).toEqual(['id', 'createdAt', 'cwd', '__proto__'])
  })

  it('appends events with contiguous seqs and a frozen header', async () => {
    const sessions = await store()
    const session = sessions.create({ cwd: '/work', origin: 'test', delegationDepth: 0 })
    completeTurn(session, 1, 'hi', 'hello')
    expect(session.events().map((event) => event.seq)).toEqual([0, 1, 2, 3, 4, 5])
    expect(Object.isFrozen(session.header)).toBe(true)
    expect(session.header).toMatchObject({ cwd: '/work', origin: 'test', delegationDepth: 0 })
    expect(session.completedLength).toBe(6)
    expect(session.ownPrompt).toBe('hi')
  })

  it('tells subscribers about each event and stops after release', async () => {
    const sessions = await store()
    const session = sessions.create()
    const seen: string[] = []
    session.subscribe((update) => seen.push(update.type))
    session.append({ type: 'turn/start', turn: 1 })
    session.publish({ type: 'assistant/chunk', kind: 'text', text: 'x' })
    await sessions.release(session)
    expect(() => session.append({ type: 'turn/start', turn: 2 })).toThrow(/released/)
    expect(seen).toEqual(['turn/start', 'assistant/chunk'])
    expect(sessions.get(session.id)).toBeUndefined()
  })

  it('a throwing listener does not stop the log or its peers', async () => {
    const sessions = await store()
    const session = sessions.create()
    const seen: number[] = []
    session.subscribe(() => {
      throw new Error('bad listener')
    })
    session.subscribe((update) => {
      if (update.type !== 'assistant/chunk') seen.push(update.seq)
    })
    session.append({ type: 'turn/start', turn: 1 })
    expect(seen).toEqual([0])
  })

  it('a fork seed shares the parent\'s prefix: same event objects, seqs continue after it', async () => {
    const sessions = await store()
    const parent = sessions.create()
    completeTurn(parent, 1, 'first', 'one')
    parent.append({ type: 'turn/start', turn: 2 })
    const child = sessions.create({ parentSession: parent.id, seed: { session: parent, length: parent.completedLength } })
    expect(child.header.seedLength).toBe(6)
    expect(child.at(3)).toBe(parent.at(3))
    child.append({ type: 'turn/start', turn: 1 })
    expect(child.at(6)).toMatchObject({ seq: 6, type: 'turn/start' })
    expect(child.ownEvents()).toHaveLength(1)
    expect(parent.length).toBe(7)
    expect(child.ownPrompt).toBeUndefined()
  })

  it('projects messages from the log, sharing the seeded prefix with the parent', async () => {
    const sessions = await store()
    const parent = sessions.create()
    completeTurn(parent, 1, 'p1', 'a1')
    completeTurn(parent, 2, 'p2', 'a2')
    const child = sessions.create({ seed: { session: parent, length: 6 } })
    completeTurn(child, 1, 'c1', 'ca1')
    const messages = child.messages().toArray()
    expect(messages.map((message) => message.content[0].type === 'text' && message.content[0].text)).toEqual(['p1', 'a1', 'c1', 'ca1'])
    expect(child.messages().at(0)).toBe(parent.messages().at(0))
    expect(child.ownPrompt).toBe('c1')
  })

  it('a fork of a fork reads through both prefixes', async () => {
    const sessions = await store()
    const root = sessions.create()
    completeTurn(root, 1, 'r', 'ra')
    const middle = sessions.create({ seed: { session: root, length: 6 } })
    completeTurn(middle, 1, 'm', 'ma')
    const leaf = sessions.create({ seed: { session: middle, length: middle.completedLength } })
    expect(leaf.length).toBe(12)
    expect(leaf.messages().toArray().map((message) => message.content[0].type === 'text' && message.content[0].text)).toEqual(['r', 'ra', 'm', 'ma'])
  })

  it('rejects a seed longer than the parent log', async () => {
    const sessions = await store()
    const parent = sessions.create()
    expect(() => sessions.create({ seed: { session: parent, length: 3 } })).toThrow(/outside the parent log/)
  })
})
