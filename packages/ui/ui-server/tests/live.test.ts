/**
 * The page of a running process, against the real parts: the approval broker, the subagent
 * seam with a tree cap, background delegation through `@dsh/tool-subagent` and the JSONL
 * session store; only the model is scripted. `RunDesk` is the broker's front-end and the
 * page's live state, `serveUi` the HTTP side; answers are POSTed as the page sends them.
 */
import { afterEach, describe, expect, it } from 'vitest'
import { ApprovalService } from '@dsh/approvals'
import { SpawnPlugin } from '@dsh/subagent-spawn'
import { TaskToolsPlugin } from '@dsh/tool-tasks'
import { SubagentToolPlugin } from '@dsh/tool-subagent'
import { createDelegationHarness, type DelegationHarness } from '@dsh/testkit/delegation'
import { RunDesk, serveUi, SessionIndex, Views } from '@dsh/ui-server'
import { PAGE_FRONT_END } from '../src/live.js'
import { MAX_ANSWER_BYTES, type UiServer } from '../src/server.js'
import type { NodeView } from '../src/views.js'

let harness: DelegationHarness | undefined
let desk: RunDesk | undefined
let server: UiServer | undefined
let index: SessionIndex | undefined
afterEach(async () => {
  await server?.close()
  index?.close()
  desk?.dispose()
  await harness?.dispose()
  server = desk = harness = index = undefined
})

/** Poll a condition of the process's state (not a clock) until it holds. */
async function until<T>(read: () => T | undefined, what: string): Promise<T> {
  for (let tries = 0; tries < 2000; tries++) {
    const value = read()
    if (value !== undefined && value !== false) return value
    await new Promise((resolve) => setTimeout(resolve, 10))
  }
  throw new Error(`never happened: ${what}`)
}

/**
 * A root that starts two background children under a cap of one: "worker" runs two
 * commands through a side-effecting tool, each asked about; "later" waits for the slot.
 */
async function setup(options: { answers?: boolean; timeoutMs?: number } = {}) {
  harness = await createDelegationHarness({
    subagents: { tree: { maxConcurrent: 1 } },
    script: [
      { when: { prompt: '^do the work' }, reply: [{ call: { tool: 'run', args: { command: 'touch first' } } }, { call: { tool: 'run', args: { command: 'touch second' } } }, { text: 'worker done' }] },
      { when: { prompt: '^later' }, reply: [{ text: 'later done' }] },
      {
        when: { depth: 0 },
        reply: [
          {
            calls: [
              { tool: 'subagent', args: { description: 'worker', prompt: 'do the work', run_in_background: true } },
              { tool: 'subagent', args: { description: 'later', prompt: 'later', run_in_background: true } },
            ],
          },
          { calls: [{ tool: 'task_output', args: { task_id: 'subagent-1', wait: true } }, { tool: 'task_output', args: { task_id: 'subagent-2', wait: true } }] },
          { text: 'root done' },
        ],
      },
    ] as never,
    plugins: [[ApprovalService, { ask: ['run(touch *)'], ...(options.timeoutMs !== undefined && { timeoutMs: options.timeoutMs }) }], [SpawnPlugin, {}], [SubagentToolPlugin, { provider: 'spawn' }], [TaskToolsPlugin, {}]],
  })
  const ran: string[] = []
  harness.ctx.tools.register({
    name: 'run',
    description: 'runs a command',
    parameters: { type: 'object', properties: { command: { type: 'string' } }, required: ['command'] },
    sideEffecting: true,
    execute: (args: { command: string }) => {
      ran.push(args.command)
      return `ran ${args.command}`
    },
  })
  desk = new RunDesk(harness.ctx, { answers: options.answers ?? true })
  index = new SessionIndex(harness.dir!)
  await index.open()
  return { ctx: harness.ctx, ran, desk, views: new Views(index, desk) }
}

const byLabel = (tree: NodeView | undefined, label: string) => tree?.children.find((child) => child.label === label)

describe('the running process on the page', () => {
  it('a child waiting for an approval and a background child queued for its slot are shown as such; answering from the page lets the run go on', async () => {
    const { ran, desk, views } = await setup()
    const root = await harness!.agent({ meta: { origin: 'cli' } })
    const done = root.followup('start')
    const [request] = await until(() => (desk.pending().length > 0 ? desk.pending() : undefined), 'a request pending')
    expect(request).toMatchObject({ path: ['dsh', 'spawn "worker"'], tool: 'run', display: 'touch first', policy: 'ask', rule: 'run(touch *) (config)', answerable: true })
    expect(request!.expiresAt - request!.startedAt).toBe(300_000)
    expect(desk.queued()).toEqual([expect.objectContaining({ taskId: 'subagent-2', owner: root.id, label: 'later' })])
    // Both children's files are read as they are written: wait until the worker's own session is in the tree too, not only the parent's record of it.
    const tree = await until(() => {
      const shown = views.tree(root.id)
      return byLabel(shown, 'later') !== undefined && byLabel(shown, 'worker')?.state === 'waiting-for-approval' ? shown : undefined
    }, 'the queued child and the waiting worker in the tree')
    expect(byLabel(tree, 'worker')).toMatchObject({ state: 'waiting-for-approval', waiting: [{ id: request!.id, tool: 'run', display: 'touch first' }] })
    expect(byLabel(tree, 'later')).toMatchObject({ state: 'queued', task: 'subagent-2' })

    expect(desk.answer(request!.id, 'reject')).toEqual({ ok: true, id: request!.id, decision: 'reject' })
    // The same id again, before and after the broker has settled it: refused, nothing changes.
    expect(desk.answer(request!.id, 'allow-once')).toMatchObject({ ok: false, status: 409 })
    const second = await until(() => desk.pending().find((pending) => pending.display === 'touch second'), 'the second request')
    expect(desk.answer(request!.id, 'allow-once')).toMatchObject({ ok: false, status: 409, error: expect.stringContaining(`reject by ${PAGE_FRONT_END}`) })
    expect(desk.answer('approval-999', 'allow-once')).toMatchObject({ ok: false, status: 404 })
    expect(desk.answer(second.id, 'allow-once')).toMatchObject({ ok: true })
    await done
    expect(ran).toEqual(['touch second'])
    const after = await until(() => {
      const shown = views.tree(root.id)
      return shown?.state === 'completed' && shown.children.length === 2 && shown.children.every((child) => child.state === 'completed') ? shown : undefined
    }, 'the run completed in the files')
    expect(after.children.every((child) => child.task === undefined && child.waiting === undefined)).toBe(true)
    // The decisions are in the worker's transcript with who decided and when.
    const worker = byLabel(after, 'worker')!
    const decisions = views.transcript(worker.id)!.entries.filter((entry) => entry.permission).map((entry) => entry.permission)
    expect(decisions).toEqual([
      expect.objectContaining({ decision: 'reject', by: PAGE_FRONT_END, source: 'user', at: expect.any(Number) }),
      expect.objectContaining({ decision: 'allow-once', by: PAGE_FRONT_END, source: 'user', at: expect.any(Number) }),
    ])
    // The root's background calls link to their children.
    expect(views.transcript(root.id)!.entries.filter((entry) => entry.kind === 'tool-result' && entry.name === 'subagent').map((entry) => entry.child)).toEqual(after.children.map((child) => child.id))
  })

  it('a request withdrawn (its time is up) leaves the page, and an answer to it is a 409 that runs nothing; a page that only shows requests answers none', async () => {
    const { ran, desk } = await setup({ timeoutMs: 200 })
    const root = await harness!.agent({ meta: { origin: 'cli' } })
    const done = root.followup('start')
    const [first] = await until(() => (desk.pending().length > 0 ? desk.pending() : undefined), 'a request pending')
    const second = await until(() => desk.pending().find((pending) => pending.display === 'touch second'), 'the first timed out and the second asked')
    expect(desk.pending().map((pending) => pending.id)).toEqual([second.id])
    expect(desk.answer(first!.id, 'allow-once')).toMatchObject({ ok: false, status: 409, error: expect.stringContaining('nobody answered in time') })
    await done
    expect(ran).toEqual([])

    // Without answers the page lists what the broker asks of someone else, and answers none of it.
    const watcher = new RunDesk(harness!.ctx, { answers: false })
    try {
      const other = harness!.ctx.approvals.addFrontEnd({ name: 'the test user', ask: () => new Promise(() => {}) })
      const child = await harness!.agent({ meta: { origin: 'cli' } })
      void harness!.ctx.tools.execute({ type: 'tool-call', id: 'c1', name: 'run', args: { command: 'touch third' } }, { signal: new AbortController().signal, callId: 'c1', agent: child })
      const shown = await until(() => watcher.pending().find((pending) => pending.display === 'touch third'), 'the request listed')
      expect(shown.answerable).toBe(false)
      expect(watcher.answer(shown.id, 'allow-once')).toMatchObject({ ok: false, status: 409, error: expect.stringContaining('not asked of this page') })
      other()
    } finally {
      watcher.dispose()
    }
  })
})

describe('answers over HTTP', () => {
  async function served() {
    const state = await setup()
    server = await serveUi({ sessionDir: harness!.dir!, live: state.desk })
    const { origin, searchParams } = new URL(server.url)
    const token = searchParams.get('token')!
    const root = await harness!.agent({ meta: { origin: 'cli' } })
    const done = root.followup('start')
    const [request] = await until(() => (state.desk.pending().length > 0 ? state.desk.pending() : undefined), 'a request pending')
    const post = (path: string, init: { headers?: Record<string, string>; body?: string } = {}) =>
      fetch(`${origin}${path}`, { method: 'POST', headers: { authorization: `Bearer ${token}`, 'content-type': 'application/json', ...init.headers }, body: init.body ?? JSON.stringify({ decision: 'reject' }) })
    return { ...state, origin, token, root, done, request: request!, post }
  }

  it('an answer needs the Bearer header, this page\'s origin, a JSON body of exactly one decision and a pending id; each refusal changes nothing', async () => {
    const { origin, token, request, post, desk, ran, done } = await served()
    const path = `/api/approvals/${request.id}`
    const refusals: Array<[number, Response]> = [
      [401, await fetch(`${origin}${path}?token=${token}`, { method: 'POST', headers: { 'content-type': 'application/json' }, body: '{"decision":"allow-once"}' })],
      [401, await post(path, { headers: { authorization: `Bearer ${'0'.repeat(token.length)}` } })],
      [403, await post(path, { headers: { origin: 'http://127.0.0.1.evil.example' } })],
      [415, await post(path, { headers: { 'content-type': 'application/x-www-form-urlencoded' }, body: 'decision=allow-once' })],
      [415, await post(path, { headers: { 'content-type': 'text/plain' }, body: '{"decision":"allow-once"}' })],
      [400, await post(path, { body: 'not json' })],
      [400, await post(path, { body: '["allow-once"]' })],
      [400, await post(path, { body: '{"decision":"allow-once","by":"root"}' })],
      [400, await post(path, { body: '{"decision":"always"}' })],
      [413, await post(path, { body: JSON.stringify({ decision: 'allow-once', pad: 'x'.repeat(MAX_ANSWER_BYTES) }) })],
      [400, await post('/api/approvals/..%2Fruns')],
      [404, await post('/api/approvals/approval-12345')],
      [405, await post('/api/runs')],
    ]
    for (const [status, response] of refusals) {
      expect(response.status, await response.clone().text()).toBe(status)
      expect(((await response.json()) as { error: string }).error).toEqual(expect.any(String))
    }
    // Not a GET: the read API answers nothing else, and the answer route is POST only.
    expect((await fetch(`${origin}${path}?token=${token}`)).status).toBe(405)
    expect((await fetch(`${origin}/api/approvals?token=${token}`, { method: 'DELETE' })).status).toBe(405)
    expect(desk.pending().map((pending) => pending.id)).toEqual([request.id])
    expect(ran).toEqual([])

    const listed = (await (await fetch(`${origin}/api/approvals?token=${token}`)).json()) as { live: boolean; answers: boolean; pending: Array<Record<string, unknown>> }
    expect(listed).toMatchObject({ live: true, answers: true, pending: [{ id: request.id, path: ['dsh', 'spawn "worker"'], tool: 'run', display: 'touch first', answerable: true }] })
    // The whole arguments are never listed: the shortened subject is.
    expect(listed.pending[0]).not.toHaveProperty('args')

    const answered = await post(path, { headers: { origin }, body: '{"decision":"allow-once"}' })
    expect(answered.status).toBe(200)
    expect(await answered.json()).toEqual({ id: request.id, decision: 'allow-once' })
    expect((await post(path, { body: '{"decision":"reject"}' })).status).toBe(409)
    const second = await until(() => desk.pending().find((pending) => pending.display === 'touch second'), 'the second request')
    expect((await post(`/api/approvals/${second.id}`, { body: '{"decision":"allow-always"}' })).status).toBe(200)
    await done
    expect(ran).toEqual(['touch first', 'touch second'])
  })
})
