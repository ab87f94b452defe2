/**
 * Claude Code's permission asks reach the parent's approval broker (`permissionMode: ask`,
 * the default): the real binary through the real SDK against the fake Messages API, the
 * real broker (`@dsh/approvals`), and a front-end registered on it standing in for the
 * person at the root. Only the model is scripted.
 */
import { existsSync, readFileSync } from 'node:fs'
import { tmpdir } from 'node:os'
import { join } from 'node:path'
import { afterEach, describe, expect, it } from 'vitest'
import { text } from '@dsh/llm'
import type { Agent } from '@dsh/agent'
import type { ApprovalRequestInfo, FrontEndAnswer } from '@dsh/approvals'
import { brokerCall } from '../src/index.js'
import { gone, setup, type Fixture } from './fixture.js'

let fixture: Fixture | undefined
afterEach(async () => {
  await fixture?.dispose()
  fixture = undefined
})

interface MessagesBody {
  messages: { role: string; content: string | { type: string; tool_use_id?: string; is_error?: boolean; content?: unknown }[] }[]
}

/** A front-end that answers every request with `answer(request)` and keeps what it was asked. */
function frontEnd(f: Fixture, answer: (request: ApprovalRequestInfo, signal: AbortSignal) => Promise<FrontEndAnswer> | FrontEndAnswer): ApprovalRequestInfo[] {
  const asked: ApprovalRequestInfo[] = []
  f.harness.ctx.approvals.addFrontEnd({
    name: 'the test',
    ask: async (request, signal) => {
      asked.push(request)
      return answer(request, signal)
    },
  })
  return asked
}

function approvalEvents(agent: Agent) {
  return agent.session.events().flatMap((event) => (event.type === 'approval' ? [event] : []))
}

/** The tool results the model was sent in its `request`-th request (1-based). */
function toolResults(f: Fixture, request: number) {
  const body = f.fake.messageRequests[request - 1]!.body as MessagesBody
  return body.messages.flatMap((message) => (Array.isArray(message.content) ? message.content : [])).filter((block) => block.type === 'tool_result')
}

async function open(approvals: Record<string, unknown> | undefined, config: Record<string, unknown> = {}): Promise<Fixture> {
  fixture = await setup([], config, {}, approvals)
  return fixture
}

describe('claude-code permission asks go to the parent\'s approval broker', () => {
  it('a rejection from the front-end denies the call with the broker\'s reason: the command is not run, and the decision is recorded in the parent\'s session naming the child', async () => {
    const f = await open({})
    const marker = join(f.workDir, 'marker')
    f.fake.enqueue({ toolUses: [{ id: 'toolu_touch', name: 'Bash', input: { command: `touch ${marker}`, description: 'make the marker' } }] }, { text: 'I was not allowed to.' })
    const asked = frontEnd(f, () => ({ decision: 'reject', by: 'the test', reason: 'not today' }))
    const run = await f.start('Make the marker.', { label: 'marker maker' })
    const result = await run.result
    expect(result).toMatchObject({ stopReason: 'completed', output: [text('I was not allowed to.')] })
    expect(existsSync(marker)).toBe(false)
    // Named as rules name it: bash with its command, on behalf of the parent, as the run's child.
    expect(asked).toMatchObject([{ tool: 'bash', subject: `touch ${marker}`, kind: 'execute', child: run.id, path: ['dsh test', 'claude-code "marker maker"'], callId: 'toolu_touch' }])
    expect(approvalEvents(f.parent)).toMatchObject([
      { request: { path: ['dsh test', 'claude-code "marker maker"'], tool: 'bash', subject: `touch ${marker}`, child: run.id }, permission: { decision: 'reject', by: 'the test', reason: 'not today', source: 'user' } },
    ])
    // The model read why.
    const [denied] = toolResults(f, 2)
    expect(denied).toMatchObject({ tool_use_id: 'toolu_touch', is_error: true })
    expect(JSON.stringify(denied)).toContain('Permission denied by the test: not today.')
    expect(result.diagnostic).toMatch(/^denied 1 tool permission ask: Bash \{"command":"touch /)
    await run.dispose()
  })

  it('an allowing front-end lets the command run, with its input unchanged', async () => {
    const f = await open({})
    const marker = join(f.workDir, 'marker')
    f.fake.enqueue({ toolUses: [{ name: 'Bash', input: { command: `touch ${marker}`, description: 'make the marker' } }] }, { text: 'Done.' })
    const asked = frontEnd(f, () => ({ decision: 'allow-once', by: 'the test' }))
    const run = await f.start('Make the marker.')
    expect(await run.result).toMatchObject({ stopReason: 'completed', output: [text('Done.')] })
    expect(existsSync(marker)).toBe(true)
    expect(asked).toHaveLength(1)
    expect(approvalEvents(f.parent)).toMatchObject([{ request: { tool: 'bash', child: run.id }, permission: { decision: 'allow-once', source: 'user' } }])
    await run.dispose()
  })

  it('a rule of the broker (allow: ["bash(touch *)"]) lets the command through with nobody asked; one chained to another command is still asked', async () => {
    // (Claude Code runs commands it reads as read-only, such as echo, without asking at all: touch is asked.)
    const f = await open({ allow: ['bash(touch *)'] })
    const made = join(f.workDir, 'made')
    const other = join(f.workDir, 'other')
    f.fake.enqueue(
      { toolUses: [{ name: 'Bash', input: { command: `touch ${made}`, description: 'make it' } }] },
      { toolUses: [{ name: 'Bash', input: { command: `touch ${other} && rm ${made}`, description: 'make the other, remove the first' } }] },
      { text: 'Done.' },
    )
    const asked = frontEnd(f, () => ({ decision: 'reject', by: 'the test', reason: 'the front-end was asked' }))
    const run = await f.start('Touch things.')
    expect(await run.result).toMatchObject({ stopReason: 'completed' })
    // The rule allows touch, not the rm chained after it: that was asked, and rejected.
    expect(existsSync(made)).toBe(true)
    expect(existsSync(other)).toBe(false)
    expect(asked.map((request) => request.subject)).toEqual([`touch ${other} && rm ${made}`])
    expect(approvalEvents(f.parent).map((event) => [event.request.subject, event.permission.decision, event.permission.source, event.permission.rule])).toEqual([
      [`touch ${made}`, 'allow-once', 'rule', 'bash(touch *) (config)'],
      [`touch ${other} && rm ${made}`, 'reject', 'user', undefined],
    ])
    await run.dispose()
  })

  it('cancelling the delegation while the ask is pending withdraws it: rejected at the broker, and nothing runs', async () => {
    const f = await open({})
    const marker = join(f.workDir, 'marker')
    f.fake.enqueue({ toolUses: [{ name: 'Bash', input: { command: `touch ${marker}`, description: 'make the marker' } }] }, { text: 'never' })
    let withdrawn: AbortSignal | undefined
    frontEnd(
      f,
      (_request, signal) =>
        new Promise<FrontEndAnswer>((resolve) => {
          withdrawn = signal
          // Nobody answers; what comes once it is withdrawn is ignored.
          signal.addEventListener('abort', () => resolve({ decision: 'allow-once', by: 'too late' }), { once: true })
        }),
    )
    const controller = new AbortController()
    const run = await f.start('Make the marker.', { signal: controller.signal })
    const approvals = f.harness.ctx.approvals
    for (let tries = 0; approvals.pending().length === 0; tries++) {
      if (tries > 1000) throw new Error('the ask never reached the broker')
      await new Promise((resolve) => setTimeout(resolve, 20))
    }
    expect(approvals.waitingUnder(run.id)).toHaveLength(1)
    controller.abort(new Error('the parent was cancelled'))
    expect((await run.result).stopReason).toBe('aborted')
    expect(withdrawn?.aborted).toBe(true)
    expect(approvals.pending()).toEqual([])
    expect(approvalEvents(f.parent)).toMatchObject([{ request: { tool: 'bash', child: run.id }, permission: { decision: 'reject', source: 'cancelled' } }])
    await run.dispose()
    expect(gone(run.pid!)).toBe(true)
    expect(existsSync(marker)).toBe(false)
  })

  it('a file write is asked about as an edit of its path', async () => {
    const f = await open({ allow: [`edit(${tmpdir()}/*)`] })
    const file = join(f.workDir, 'written.txt')
    f.fake.enqueue({ toolUses: [{ name: 'Write', input: { file_path: file, content: 'hello' } }] }, { text: 'Written.' })
    const asked = frontEnd(f, () => ({ decision: 'reject', by: 'the test', reason: 'the front-end was asked' }))
    const run = await f.start('Write the file.')
    expect(await run.result).toMatchObject({ stopReason: 'completed' })
    expect(asked).toEqual([])
    expect(readFileSync(file, 'utf8')).toBe('hello')
    expect(approvalEvents(f.parent)).toMatchObject([{ request: { tool: 'edit', subject: file }, permission: { decision: 'allow-once', source: 'rule' } }])
    await run.dispose()
  })

  it('without a broker, ask denies every ask and tells the model nobody can approve it', async () => {
    const f = await open(undefined)
    const marker = join(f.workDir, 'marker')
    f.fake.enqueue({ toolUses: [{ name: 'Bash', input: { command: `touch ${marker}`, description: 'make the marker' } }] }, { text: 'I could not.' })
    const run = await f.start('Make the marker.')
    const result = await run.result
    expect(result.diagnostic).toMatch(/^denied 1 tool permission ask: Bash/)
    expect(existsSync(marker)).toBe(false)
    expect(JSON.stringify(toolResults(f, 2))).toContain('permissionMode \\"ask\\", and no approval broker is composed above it, so nobody can approve tool use')
    await run.dispose()
  })

  it('permissionMode deny answers here even with a broker: nobody is asked', async () => {
    const f = await open({}, { permissionMode: 'deny' })
    const marker = join(f.workDir, 'marker')
    f.fake.enqueue({ toolUses: [{ name: 'Bash', input: { command: `touch ${marker}`, description: 'make the marker' } }] }, { text: 'I could not.' })
    const asked = frontEnd(f, () => ({ decision: 'allow-once', by: 'the test' }))
    const run = await f.start('Make the marker.')
    await run.result
    expect(asked).toEqual([])
    expect(approvalEvents(f.parent)).toEqual([])
    expect(existsSync(marker)).toBe(false)
    await run.dispose()
  })
})

describe('claude-code tool calls as the broker names them', () => {
  it('Bash is bash with its command; the file tools are edit with their path; the rest keep their name and input', () => {
    expect(brokerCall('Bash', { command: 'npm test', description: 'run the tests', timeout: 5 })).toEqual({ tool: 'bash', args: { command: 'npm test' } })
    for (const tool of ['Edit', 'Write', 'MultiEdit']) expect(brokerCall(tool, { file_path: '/w/a.ts', content: 'x' })).toEqual({ tool: 'edit', args: { path: '/w/a.ts' } })
    expect(brokerCall('NotebookEdit', { notebook_path: '/w/n.ipynb', new_source: '' })).toEqual({ tool: 'edit', args: { path: '/w/n.ipynb' } })
    expect(brokerCall('WebFetch', { url: 'https://example.com', prompt: 'read' })).toEqual({ tool: 'WebFetch', args: { url: 'https://example.com', prompt: 'read' } })
    // An input without the promised field is passed whole: its subject is never less than the call.
    expect(brokerCall('Bash', { command: ['rm', '-rf'] })).toEqual({ tool: 'bash', args: { command: ['rm', '-rf'] } })
    expect(brokerCall('Write', { content: 'x' })).toEqual({ tool: 'edit', args: { content: 'x' } })
  })
})
