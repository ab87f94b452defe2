import { mkdtempSync, realpathSync } from 'node:fs'
import { tmpdir } from 'node:os'
import { join } from 'node:path'
import { afterEach, describe, expect, it } from 'vitest'
import { client, methods, PROTOCOL_VERSION, type ClientConnection, type SessionUpdate, type Stream } from '@agentclientprotocol/sdk'
import { ApprovalService } from '@dsh/approvals'
import { createHarness, type Harness, type HarnessOptions } from '@dsh/testkit/harness'
import { BashService } from '@dsh/bash'
import { SubagentService, type SubagentProgressInfo } from '@dsh/subagent'
import { SpawnPlugin } from '@dsh/subagent-spawn'
import { TaskService } from '@dsh/tasks'
import { BashToolPlugin } from '@dsh/tool-bash'
import { SubagentToolPlugin } from '@dsh/tool-subagent'
import { TaskToolsPlugin } from '@dsh/tool-tasks'
import { compactArgs, serveAcp } from '@dsh/acp-server'
import { columnWidth } from '@dsh/subagent'

let harness: Harness | undefined
let connection: ClientConnection | undefined
afterEach(async () => {
  connection?.close()
  await harness?.dispose()
  harness = undefined
  connection = undefined
})

/** A real harness with spawn children, bash and background tasks, served to a real SDK client. */
async function serve(script: HarnessOptions['script']) {
  harness = await createHarness({ script })
  await harness.plugin(SubagentService)
  await harness.plugin(ApprovalService)
  await harness.plugin(SpawnPlugin, {})
  await harness.plugin(TaskService)
  await harness.plugin(TaskToolsPlugin)
  await harness.plugin(BashService)
  await harness.plugin(BashToolPlugin)
  await harness.plugin(SubagentToolPlugin, { provider: 'spawn' })
  const toServer = new TransformStream()
  const toClient = new TransformStream()
  serveAcp(harness.ctx, { readable: toServer.readable, writable: toClient.writable } as Stream, { permission: 'allow' })
  connection = client({ name: 'test-client' }).connect({ readable: toClient.readable, writable: toServer.writable } as Stream)
  await connection.agent.request(methods.agent.initialize, { protocolVersion: PROTOCOL_VERSION, clientCapabilities: {} })
  const session = await connection.agent.buildSession(realpathSync(mkdtempSync(join(tmpdir(), 'acp-progress-')))).start()
  return session
}

type Session = Awaited<ReturnType<typeof serve>>

/** Every update of one prompt, and its response. */
async function turn(session: Session, prompt: string) {
  const answer = session.prompt(prompt)
  const updates: SessionUpdate[] = []
  for (;;) {
    const message = await session.nextUpdate()
    if (message.kind === 'stop') return { updates, response: await answer }
    updates.push(message.update)
  }
}

type ToolUpdate = Extract<SessionUpdate, { sessionUpdate: 'tool_call_update' }>
/** A descendant's start or end named to a dsh parent (`_meta.dsh.descendant`), if the update is one. */
const descendantOf = (update: SessionUpdate) => (update._meta?.dsh as { descendant?: Record<string, unknown> } | undefined)?.descendant
/** The updates of one call that show progress or its result (not the descendants' starts and ends). */
const onCall = (updates: SessionUpdate[], callId: string) =>
  updates.filter((update): update is ToolUpdate => update.sessionUpdate === 'tool_call_update' && update.toolCallId === callId && descendantOf(update) === undefined)
const texts = (update: ToolUpdate) => (update.content ?? []).map((block) => (block.type === 'content' && block.content.type === 'text' ? block.content.text : ''))

describe('children\'s progress in the editor', () => {
  it('a child\'s tools and writing arrive as tool_call_update content on the parent\'s subagent call, before its result', async () => {
    const session = await serve([
      { when: { depth: 1 }, reply: [{ text: 'Looking around.', call: { tool: 'bash', args: { command: 'echo hi' } } }, { text: 'the child found 42' }] },
      { when: { depth: 0 }, reply: [{ call: { tool: 'subagent', args: { description: 'look around', prompt: 'look' } } }, { text: 'parent: {{last_tool_result}}' }] },
    ])
    const { updates, response } = await turn(session, 'go')
    expect(response.stopReason).toBe('end_turn')
    const call = updates.find((update) => update.sessionUpdate === 'tool_call' && update.title === 'subagent') as { toolCallId: string }
    const onSubagent = onCall(updates, call.toolCallId)
    const final = onSubagent.findIndex((update) => update.status === 'completed')
    expect(final).toBeGreaterThan(0)
    expect(onSubagent.slice(final + 1)).toEqual([])
    const progress = onSubagent.slice(0, final)
    expect(progress.every((update) => update.status === undefined)).toBe(true)
    const shown = progress.flatMap(texts)
    expect(shown).toContain('↳ [look around] writing…')
    expect(shown).toContain('↳ [look around] bash: echo hi')
    // The last progress shows the whole tail, in the order the child worked.
    expect(texts(progress.at(-1)!)).toEqual(['↳ [look around] writing…', '↳ [look around] bash: echo hi', '↳ [look around] writing…'])
    expect(progress.at(-1)!._meta).toMatchObject({ dsh: { subagent: { provider: 'spawn', label: 'look around', id: expect.any(String), runId: expect.any(String) } } })
    expect(texts(onSubagent[final]).join('')).toContain('the child found 42')
  })

  it('a background child\'s progress never follows the final update of the call that started it', async () => {
    const session = await serve([
      { when: { depth: 1 }, reply: [{ text: 'working', call: { tool: 'bash', args: { command: 'echo step' } } }, { text: 'background answer' }] },
      {
        when: { depth: 0 },
        reply: [
          { call: { tool: 'subagent', args: { description: 'audit', prompt: 'audit', run_in_background: true } } },
          { call: { tool: 'task_output', args: { task_id: 'subagent-1', wait: true, timeout_ms: 10_000 } } },
          { text: 'collected' },
        ],
      },
    ])
    const heard: SubagentProgressInfo[] = []
    harness!.ctx.on('subagent/progress', (info) => void heard.push(info))
    const { updates } = await turn(session, 'go')
    const call = updates.find((update) => update.sessionUpdate === 'tool_call' && update.title === 'subagent') as { toolCallId: string }
    // The child did report, on this call, after the call had answered.
    expect(heard.some((info) => info.callId === call.toolCallId && info.updates.some((update) => update.kind === 'tool-start'))).toBe(true)
    const onSubagent = onCall(updates, call.toolCallId)
    expect(onSubagent.map((update) => update.status)).toEqual(['completed'])
  })

  it("a child's and its own child's start and end are named on the call that started the branch (_meta.dsh.descendant), before its result", async () => {
    const session = await serve([
      { when: { depth: 2 }, reply: [{ text: 'grand answer' }] },
      { when: { depth: 1 }, reply: [{ call: { tool: 'subagent', args: { description: 'deeper', prompt: 'deeper' } } }, { text: 'child answer' }] },
      { when: { depth: 0 }, reply: [{ call: { tool: 'subagent', args: { description: 'look around', prompt: 'look' } } }, { text: 'parent: {{last_tool_result}}' }] },
    ])
    const { updates } = await turn(session, 'go')
    const call = updates.find((update) => update.sessionUpdate === 'tool_call' && update.title === 'subagent') as { toolCallId: string }
    const onBranch = updates.filter((update) => update.sessionUpdate === 'tool_call_update' && update.toolCallId === call.toolCallId)
    const named = onBranch.flatMap((update) => {
      const descendant = descendantOf(update)
      return descendant === undefined ? [] : [`${String(descendant.event)} ${(descendant.path as string[]).join('/')} ${String(descendant.stopReason)}`]
    })
    expect(named).toEqual(['start spawn "look around" undefined', 'start spawn "look around"/spawn "deeper" undefined', 'end spawn "look around"/spawn "deeper" completed', 'end spawn "look around" completed'])
    // All before the call's result, its final update.
    const final = onBranch.findIndex((update) => update.status === 'completed')
    expect(onBranch.slice(final + 1)).toEqual([])
  })

    it('the prompt response carries the usage of the prompt\'s model calls in _meta.dsh.usage', async () => {
    const session = await serve([{ when: { depth: 0 }, reply: [{ text: 'one' }, { text: 'two' }] }])
    const first = await turn(session, 'hello')
    const usage = (first.response._meta as { dsh: { usage: { inputTokens: number; outputTokens: number; cachedInputTokens: number } } }).dsh.usage
    const recorded = harness!.ctx.agents.get(session.sessionId)!.session.events().flatMap((event) => (event.type === 'assistant/message' && event.usage ? [event.usage] : []))
    expect(recorded).toHaveLength(1)
    expect(usage).toEqual({ inputTokens: recorded[0].inputTokens, outputTokens: recorded[0].outputTokens, cachedInputTokens: recorded[0].cacheHitInputTokens ?? 0 })
    expect(usage.inputTokens).toBeGreaterThan(0)
    // Each prompt reports its own calls, not the session's running total.
    const second = await turn(session, 'again')
    const again = (second.response._meta as { dsh: { usage: { inputTokens: number } } }).dsh.usage
    const all = harness!.ctx.agents.get(session.sessionId)!.session.events().flatMap((event) => (event.type === 'assistant/message' && event.usage ? [event.usage] : []))
    expect(again.inputTokens).toBe(all[1].inputTokens)
  })

  it('arguments show as their single text value, else as given, on one bounded line', () => {
    expect(compactArgs('{"command":"ls -la"}')).toBe('ls -la')
    // A JSON escape parsed for display does not become a control character on the client.
    expect(compactArgs(JSON.stringify({ command: '\u001b[2Jls\nrm' }))).toBe('\\x1b[2Jls rm')
    expect(compactArgs('{"path":"a","line":3}')).toBe('{"path":"a","line":3}')
    expect(compactArgs('{"command":"cut sho…')).toBe('{"command":"cut sho…')
    expect(compactArgs(`{"command":"${'x'.repeat(200)}"}`)).toHaveLength(80)
  })

  it('arguments are measured in terminal columns: wide characters count two and no cut splits an emoji', () => {
    const wide = compactArgs(JSON.stringify({ command: `echo ${'漢'.repeat(100)}` }))
    expect(columnWidth(wide)).toBeLessThanOrEqual(80)
    expect(wide.endsWith('…')).toBe(true)
    // 5 columns of "echo ", then 37 two-column characters (74), then the ellipsis: 80.
    expect(wide).toBe(`echo ${'漢'.repeat(37)}…`)
    const emoji = compactArgs(JSON.stringify({ command: '😀'.repeat(60) }))
    expect(columnWidth(emoji)).toBeLessThanOrEqual(80)
    expect(emoji.isWellFormed()).toBe(true)
  })
})
