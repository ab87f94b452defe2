// dsh ui in a fresh process: prints one JSON object.
//   uiRender N   a run of N spawn children stored by a real harness (session-jsonl), served
//                by @dsh/ui-server; the time from opening the page in Debian's Chromium
//                (playwright-core) to the tree and timeline showing all N+1 sessions, and
//                the server's time to build the tree
import { mkdtemp, rm } from 'node:fs/promises'
import { tmpdir } from 'node:os'
import { join } from 'node:path'
import { chromium } from 'playwright-core'
import { createHarness } from '@dsh/testkit/harness'
import SessionJsonl from '@dsh/session-jsonl'
import { SubagentService } from '@dsh/subagent'
import { SpawnPlugin } from '@dsh/subagent-spawn'
import { SubagentToolPlugin } from '@dsh/tool-subagent'
import { serveUi, SessionIndex, Views } from '@dsh/ui-server'

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

const scenarios = { uiRender }
const run = scenarios[name]
if (!run) {
  console.error(`unknown scenario ${name}; known: ${Object.keys(scenarios).join(', ')}`)
  process.exit(2)
}
process.stdout.write(`${JSON.stringify(await run(Number(arg)))}\n`)
