/**
 * Where cache breakpoints go, asserted on the bodies the fake Messages server received. The
 * API caches the prompt up to a breakpoint (tools, then system, then messages) and serves a
 * later request from that entry when its prompt up to the same block is byte for byte the
 * same: a fork child's first request must reach its parent's last breakpoint unchanged.
 */
import { text, userText, type Message, type ToolSpec } from '@dsh/llm'
import { describe, expect, it } from 'vitest'
import { bodyOf, collect, fakeEndpoint, requestOf } from './helpers.js'

const SYSTEM = 'You are dsh. Answer briefly.'
const TOOLS: ToolSpec[] = [
  { name: 'bash', description: 'Run a command', parameters: { type: 'object', properties: { command: { type: 'string' } }, required: ['command'] } },
  { name: 'subagent_fork', description: 'Delegate to a fork', parameters: { type: 'object', properties: { prompt: { type: 'string' } } } },
]

interface Block {
  type: string
  cache_control?: unknown
}
interface Body {
  tools: Block[]
  system: Block[]
  messages: { role: string; content: Block[] }[]
}

/** Every block of a body that carries a breakpoint, as `tools[i]`, `system[i]` or `messages[i].content[j]`. */
function breakpoints(body: Body): string[] {
  const marked: string[] = []
  body.tools.forEach((tool, i) => tool.cache_control && marked.push(`tools[${i}]`))
  body.system.forEach((block, i) => block.cache_control && marked.push(`system[${i}]`))
  body.messages.forEach((message, i) => message.content.forEach((block, j) => block.cache_control && marked.push(`messages[${i}].content[${j}]`)))
  return marked
}

/**
 * The body's prompt up to and including message `last`, as the cache compares it: JSON in
 * the API's order, without the breakpoint markers (which say where to cache, not what).
 */
function prefixThrough(body: Body, last: number): string {
  return JSON.stringify({ tools: body.tools, system: body.system, messages: body.messages.slice(0, last + 1) }, (key, value: unknown) => (key === 'cache_control' ? undefined : value))
}

describe('prompt caching breakpoints', () => {
  it('marks the system prompt and the last message of a first request, and at most 4 blocks in any request', async () => {
    const { server, adapter } = await fakeEndpoint([{ text: 'ok' }, { text: 'ok' }])
    await collect(adapter.stream(requestOf({ system: SYSTEM, tools: TOOLS, messages: [userText('plan the release')] })))
    const history: Message[] = [
      userText('plan the release'),
      { role: 'assistant', content: [text('Looking.'), { type: 'tool-call', id: 'toolu_a', name: 'bash', args: { command: 'ls' } }] },
      { role: 'tool', content: [{ type: 'tool-result', callId: 'toolu_a', name: 'bash', content: [text('README.md')] }] },
    ]
    await collect(adapter.stream(requestOf({ system: SYSTEM, tools: TOOLS, messages: history })))
    const first = bodyOf(server, 1) as unknown as Body
    const second = bodyOf(server, 2) as unknown as Body
    expect(breakpoints(first)).toEqual(['system[0]', 'messages[0].content[0]'])
    // A step's request: the answer and the tool results appended, each of the last two marked.
    expect(breakpoints(second)).toEqual(['system[0]', 'messages[1].content[1]', 'messages[2].content[0]'])
    for (const body of [first, second]) expect(breakpoints(body).length).toBeLessThanOrEqual(4)
  })

  it('a fork child\'s first request repeats its parent\'s last request up to the parent\'s last breakpoint, byte for byte, and marks it too', async () => {
    const { server, adapter } = await fakeEndpoint([{ text: 'parent' }, { text: 'child' }])
    const parentHistory: Message[] = [
      userText('review the plan'),
      { role: 'assistant', content: [{ type: 'tool-call', id: 'toolu_ls', name: 'bash', args: { command: 'ls' } }] },
      { role: 'tool', content: [{ type: 'tool-result', callId: 'toolu_ls', name: 'bash', content: [text('plan.md')] }] },
    ]
    await collect(adapter.stream(requestOf({ system: SYSTEM, tools: TOOLS, messages: parentHistory })))
    // The fork seed is the parent's history as its last request had it; the child's prompt follows.
    await collect(adapter.stream(requestOf({ system: SYSTEM, tools: TOOLS, messages: [...parentHistory, userText('find the risks in plan.md')] })))
    const parent = bodyOf(server, 1) as unknown as Body
    const child = bodyOf(server, 2) as unknown as Body
    const parentLast = parent.messages.length - 1
    expect(breakpoints(parent)).toContain(`messages[${parentLast}].content[0]`)
    expect(breakpoints(child)).toContain(`messages[${parentLast}].content[0]`)
    expect(prefixThrough(child, parentLast)).toBe(prefixThrough(parent, parentLast))
  })

  it('marks nothing with promptCaching off', async () => {
    const { server, adapter } = await fakeEndpoint([{ text: 'ok' }], { promptCaching: false })
    await collect(adapter.stream(requestOf({ system: SYSTEM, tools: TOOLS })))
    expect(breakpoints(bodyOf(server, 1) as unknown as Body)).toEqual([])
  })

  it('marks the last tool when there is no system prompt', async () => {
    const { server, adapter } = await fakeEndpoint([{ text: 'ok' }])
    await collect(adapter.stream(requestOf({ tools: TOOLS })))
    const body = bodyOf(server, 1) as unknown as Body & { system?: unknown }
    expect(body.system).toBeUndefined()
    expect(breakpoints({ ...body, system: [] })).toEqual(['tools[1]', 'messages[0].content[0]'])
  })
})
