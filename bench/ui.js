// dsh ui in a fresh process: prints one JSON object.
//   uiRender N   a run of N spawn children stored by a real harness (session-jsonl), served
//                by @dsh/ui-server; the time from opening the page in Debian's Chromium
//                (playwright-core) to the tree and timeline showing all N+1 sessions, and
//                the server's time to build the tree
//   uiAnswer N   the page as the approval front-end (RunDesk, as dsh run --ui has it): N
//                side-effecting calls one after another, each answered by a POST as soon as
//                it is pending; the median time of a call from its start to its result, and
//                of the POST alone. Then the same with the page open in Chromium: the median
//                time from a call's start to its request showing on the page
import { mkdtemp, rm } from 'node:fs/promises'
import { tmpdir } from 'node:os'
import { join } from 'node:path'
import { chromium } from 'playwright-core'
import { createHarness } from '@dsh/testkit/harness'
import SessionJsonl from '@dsh/session-jsonl'
import { SubagentService } from '@dsh/subagent'
import { SpawnPlugin } from '@dsh/subagent-spawn'
import { SubagentToolPlugin } from '@dsh/tool-subagent'
import { serveUi, RunDesk, SessionIndex, Views } from '@dsh/ui-server'
import { ApprovalService } from '@dsh/approvals'

const [name, arg] = process.argv.slice(2)

async function uiRender(count) {
  const dir = await mkdtemp(join(tmpdir(), 'dsh-bench-ui-'))
  const harness = await createHarness({
    script: [
      { when: { prompt: '^child' }, reply: [{ text: 'child done' }] },
      { when: { prompt: '^fan' }, reply: [{ calls: Array.from({ length: count }, (_, i) => ({ tool: 'subagent', args: { description: `part ${i}`, prompt: 'child' } })) }, { text: 'ok' }] },
    ],
  })
  await harness.plugin(SessionJsonl, { dir })
  await harness.plugin(SubagentService)
  await harness.plugin(SpawnPlugin, {})
  await harness.plugin(SubagentToolPlugin, { provider: 'spawn', enableRunInBackground: false })
  const parent = await harness.agent()
  await parent.followup('fan out')
  await parent.dispose()
  await harness.dispose()

  const index = new SessionIndex(dir)
  await index.open()
  const views = new Views(index)
  const root = views.runs()[0].id
  const started = performance.now()
  views.tree(root)
  const treeMs = performance.now() - started
  index.close()

  const server = await serveUi({ sessionDir: dir })
  const browser = await chromium.launch({ executablePath: '/usr/bin/chromium', args: ['--no-sandbox', '--disable-gpu', '--disable-quic', '--no-first-run', '--disable-background-networking', '--disable-component-update', '--disable-sync'] })
  try {
    const page = await browser.newPage()
    const times = []
    for (let i = 0; i < 3; i++) {
      const wall = performance.now()
      await page.goto(server.url)
      await page.locator('.run').first().click()
      await page.waitForFunction((n) => document.querySelectorAll('.node').length === n && document.querySelectorAll('[data-bar]').length === n, count + 1, { timeout: 30_000 })
      times.push(performance.now() - wall)
    }
    times.sort((a, b) => a - b)
    return { [`ui_render_${count}_children_ms`]: times[1], [`ui_tree_${count}_children_ms`]: treeMs }
  } finally {
    await browser.close()
    await server.close()
    await rm(dir, { recursive: true, force: true })
  }
}

async function uiAnswer(count) {
  const dir = await mkdtemp(join(tmpdir(), 'dsh-bench-ui-answer-'))
  const harness = await createHarness({ script: [{ when: { depth: 0 }, reply: [{ text: 'ok' }] }] })
  await harness.plugin(SessionJsonl, { dir })
  await harness.plugin(ApprovalService, {})
  harness.ctx.tools.register({ name: 'run', description: 'runs a command', parameters: { type: 'object', properties: { command: { type: 'string' } } }, sideEffecting: true, execute: () => 'ran' })
  const desk = new RunDesk(harness.ctx, { answers: true })
  const server = await serveUi({ sessionDir: dir, live: desk })
  const { origin, searchParams } = new URL(server.url)
  const headers = { authorization: `Bearer ${searchParams.get('token')}`, 'content-type': 'application/json' }
  const agent = await harness.agent({ meta: { origin: 'cli' } })
  const median = (list) => list.sort((a, b) => a - b)[Math.floor(list.length / 2)]
  const call = (i) => harness.ctx.tools.execute({ type: 'tool-call', id: `c${i}`, name: 'run', args: { command: `touch ${i}` } }, { signal: new AbortController().signal, callId: `c${i}`, agent })
  const calls = []
  const posts = []
  const off = harness.ctx.on('approval/pending', (request) => {
    const sent = performance.now()
    void fetch(`${origin}/api/approvals/${request.id}`, { method: 'POST', headers, body: '{"decision":"allow-once"}' }).then((response) => {
      posts.push(performance.now() - sent)
      if (!response.ok) throw new Error(`answer refused: ${response.status}`)
    })
  })
  for (let i = 0; i < count; i++) {
    const started = performance.now()
    const outcome = await call(i)
    if (outcome.permission?.decision !== 'allow-once') throw new Error(`not allowed: ${JSON.stringify(outcome.permission)}`)
    calls.push(performance.now() - started)
  }
  off()
  // With the page open: from a call's start to its request on the page (server-sent event, then the list fetched).
  const browser = await chromium.launch({ executablePath: '/usr/bin/chromium', args: ['--no-sandbox', '--disable-gpu', '--disable-quic', '--no-first-run', '--disable-background-networking', '--disable-component-update', '--disable-sync'] })
  const shown = []
  try {
    const page = await browser.newPage()
    await page.goto(server.url)
    await page.waitForSelector('[data-testid="runs"]', { state: 'attached' })
    for (let i = 0; i < Math.min(count, 30); i++) {
      let id
      const heard = new Promise((resolve) => {
        const stop = harness.ctx.on('approval/pending', (request) => {
          id = request.id
          stop()
          resolve()
        })
      })
      const started = performance.now()
      const outcome = call(count + i)
      await heard
      await page.waitForSelector(`[data-approval="${id}"] button[data-answer="allow-once"]`)
      shown.push(performance.now() - started)
      await page.click(`[data-approval="${id}"] button[data-answer="allow-once"]`)
      await outcome
    }
  } finally {
    await browser.close()
    await server.close()
    desk.dispose()
    await harness.dispose()
    await rm(dir, { recursive: true, force: true })
  }
  return { ui_answer_call_ms: median(calls), ui_answer_post_ms: median(posts), ui_answer_shown_on_page_ms: median(shown) }
}

const scenarios = { uiRender, uiAnswer }
const run = scenarios[name]
if (!run) {
  console.error(`unknown scenario ${name}; known: ${Object.keys(scenarios).join(', ')}`)
  process.exit(2)
}
process.stdout.write(`${JSON.stringify(await run(Number(arg)))}\n`)
