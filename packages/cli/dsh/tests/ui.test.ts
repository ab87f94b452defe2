/**
 * `dsh ui` driven as a person would: a real `dsh ui` process, a real keyless `dsh run`
 * writing into the same session directory, and Debian's Chromium driven by
 * playwright-core. The test command's preflight installs Chromium where it is missing;
 * without it this test fails, naming the package.
 */
import { spawn, type ChildProcess } from 'node:child_process'
import { existsSync, mkdirSync, writeFileSync } from 'node:fs'
import { join } from 'node:path'
import { afterEach, describe, expect, it } from 'vitest'
import { chromium, type Browser } from 'playwright-core'
import { budgetRefusals } from './budget-refusals.js'
import { dshBin, repoRoot, runDsh, tempDir } from './cli.js'
import { until } from './processes.js'

const CHROMIUM = '/usr/bin/chromium'
const artifacts = join(repoRoot, 'test-artifacts')

let ui: ChildProcess | undefined
let browser: Browser | undefined
afterEach(async () => {
  await browser?.close()
  browser = undefined
  if (ui && ui.exitCode === null && ui.signalCode === null) ui.kill('SIGKILL')
  ui = undefined
})

/** `dsh ui` on an OS-chosen loopback port; resolves with the URL it printed. */
async function startUi(sessions: string): Promise<string> {
  const child = spawn(process.execPath, [dshBin, 'ui', '--session-dir', sessions], { cwd: repoRoot, stdio: ['ignore', 'pipe', 'pipe'] })
  ui = child
  let stdout = ''
  let stderr = ''
  child.stdout!.on('data', (chunk: Buffer) => (stdout += chunk))
  child.stderr!.on('data', (chunk: Buffer) => (stderr += chunk))
  await until(
    () => stdout.includes('\n'),
    () => (child.exitCode !== null ? `dsh ui exited ${child.exitCode}: ${stderr}` : undefined),
  )
  return stdout.trim()
}

async function launch(): Promise<Browser> {
  if (!existsSync(CHROMIUM)) throw new Error(`${CHROMIUM} is missing: install the Debian package chromium (npm test's preflight does so where it can)`)
  browser = await chromium.launch({ executablePath: CHROMIUM, args: ['--no-sandbox', '--disable-gpu', '--disable-quic', '--no-first-run', '--disable-background-networking', '--disable-component-update', '--disable-sync'] })
  return browser
}

/** A parent delegating in one step to a slow spawn child, a fork child, an ACP child and a background child; each child's own script answers. */
function runSetup(dir: string): { config: string; script: string } {
  const config = join(dir, 'tree.yml')
  writeFileSync(
    config,
    [
      '- id: tool-subagent-fork',
      '  name: "@dsh/tool-subagent"',
      '  config: { provider: fork, toolName: subagent_fork }',
      '- id: subagent-acp',
      '  name: "@dsh/subagent-acp"',
      '  config:',
      '    providerName: acp',
      `    cwd: ${JSON.stringify(repoRoot)}`,
      '    command: node',
      '    args: [packages/cli/dsh/dist/main.js, acp, --model, "scripted:examples/acp-child.yml"]',
      '- id: tool-subagent-acp',
      '  name: "@dsh/tool-subagent"',
      '  config: { provider: acp, toolName: subagent_acp }',
      '',
    ].join('\n'),
  )
  const script = join(dir, 'parent.yml')
  writeFileSync(
    script,
    [
      '- when: { prompt: "check slowly" }',
      '  reply: [{ text: "checked <b>bold</b> <script>window.pwned=1</script>", delay_ms: 2500 }]',
      '- when: { prompt: "count quietly" }',
      '  reply: [{ text: "counted", delay_ms: 300 }]',
      '- when: { prompt: "fork it" }',
      '  reply: [{ text: "forked view" }]',
      '- when: { depth: 0 }',
      '  reply:',
      '    - calls:',
      '        - { tool: subagent, args: { description: "slow check", prompt: "check slowly" } }',
      '        - { tool: subagent_fork, args: { description: "forked look", prompt: "fork it" } }',
      '        - { tool: subagent_acp, args: { description: "ask over ACP", prompt: "What is the capital of France?" } }',
      '        - { tool: subagent, args: { description: "quiet count", prompt: "count quietly", run_in_background: true } }',
      '    - call: { tool: task_output, args: { task_id: subagent-1, wait: true, timeout_ms: 10000 } }',
      '    - text: "all children answered"',
      '',
    ].join('\n'),
  )
  return { config, script }
}

describe('dsh ui', () => {
  it('shows a run appear and its children change state live, opens a child transcript, links the delegation call to it, and refuses requests without the token', async () => {
    const sessions = tempDir()
    const url = await startUi(sessions)
    expect(url).toMatch(/^http:\/\/127\.0\.0\.1:\d+\/\?token=[0-9a-f]{48}$/)
    const origin = new URL(url).origin
    expect((await fetch(`${origin}/`)).status).toBe(401)
    expect((await fetch(`${origin}/api/runs?token=wrong`)).status).toBe(401)
    expect((await fetch(`${origin}/api/transcript/..%2F..%2Fetc%2Fpasswd?${new URL(url).searchParams}`)).status).toBe(400)

    const page = await (await launch()).newPage()
    await page.goto(url)
    await page.waitForSelector('[data-testid="runs"]', { state: 'attached' })
    const { config, script } = runSetup(tempDir())
    const run = runDsh(['run', '--config', config, '--model', `scripted:${script}`, '--session-dir', sessions, '--permission', 'allow', 'build the tree'], { timeoutMs: 60_000 })

    // The run appears while it runs, and the slow child is seen running, then completed.
    await page.locator('.run').first().waitFor({ timeout: 20_000 })
    await page.locator('.run').first().click()
    const slow = page.locator('.node', { hasText: '"slow check"' })
    await slow.waitFor({ timeout: 20_000 })
    await page.locator('.node[data-state="running"]', { hasText: '"slow check"' }).waitFor({ timeout: 20_000 })
    const result = await run
    expect(result.stdout).toContain('all children answered')
    await page.locator('.node[data-state="completed"]', { hasText: '"slow check"' }).waitFor({ timeout: 20_000 })
    for (const label of ['forked look', 'ask over ACP', 'quiet count']) await page.locator('.node', { hasText: `"${label}"` }).waitFor()
    await page.locator('.run[data-state="completed"]').first().waitFor({ timeout: 20_000 })
    // The root and its four children, each once (the ACP child stores its session here too).
    expect(await page.locator('.node').count()).toBe(5)
    expect(await page.locator('[data-bar]').count()).toBe(5)
    // In the order the root asked for them, the ACP child (slowest to start, its call id only in the root's record) third.
    const asked = ['"slow check"', '"forked look"', '"ask over ACP"', '"quiet count"']
    expect((await page.locator('[data-bar-label]').allTextContents()).slice(1).map((label) => label.split(' · ')[0])).toEqual(asked)
    const tree = await runDsh(['sessions', 'tree', '--session-dir', sessions])
    expect(tree.stdout.trim().split('\n').slice(1).map((line) => /"[^"]+"/.exec(line)?.[0])).toEqual(asked)
    mkdirSync(artifacts, { recursive: true })
    await page.screenshot({ path: join(artifacts, 'dsh-ui-tree.png'), fullPage: true })

    // The parent's transcript links the delegation call to its child; following it opens the child's.
    const link = page.locator('a.child', { hasText: 'spawn' }).first()
    await link.waitFor()
    const childId = await link.getAttribute('data-child')
    await link.click()
    await page.locator('#transcript-title', { hasText: childId! }).waitFor()
    // Hostile text from the child's model is shown as text, never run.
    await page.locator('.entry.assistant', { hasText: '<script>window.pwned=1</script>' }).waitFor()
    expect(await page.evaluate(() => (window as unknown as { pwned?: number }).pwned)).toBeUndefined()
    expect(await page.locator('.entry b', { hasText: 'bold' }).count()).toBe(0)
  }, 120_000)

  it('lists each run by its prompt (shown as text), links each run to an address the page opens, labels each bar, and shows the children a budget kept from starting as not started', async () => {
    const dir = tempDir()
    const sessions = join(dir, 'sessions')
    const { config, script } = budgetRefusals(dir)
    const prompt = 'review <img src=x onerror="window.pwned=1"> \u001b[31mnow\nthe second line is not shown'
    const refusals = await runDsh(['run', '--quiet', '--config', config, '--model', `scripted:${script}`, '--session-dir', sessions, prompt], { cwd: dir })
    expect(refusals.code, refusals.stderr).toBe(0)
    // A newer run, so the address, not the list's order, decides which run is open.
    expect((await runDsh(['run', '--quiet', '--model', 'scripted:examples/hello.yml', '--session-dir', sessions, 'hello'])).code).toBe(0)
    const url = await startUi(sessions)
    const { runs } = (await (await fetch(`${new URL(url).origin}/api/runs${new URL(url).search}`)).json()) as { runs: Array<{ id: string; prompt: string }> }
    const budgeted = runs.find((run) => run.prompt.startsWith('review'))!.id
    const hello = runs.find((run) => run.prompt === 'hello')!.id

    const page = await (await launch()).newPage()
    await page.goto(`${url}#run=${encodeURIComponent(budgeted)}`)
    // Opened at the run's address: its tree, with the two children that never started and why.
    const refused = page.locator('.node[data-state="not-started"]', { hasText: '"refused"' })
    await refused.waitFor({ timeout: 20_000 })
    await expect(refused.locator('.state').textContent()).resolves.toBe('not started')
    await expect(refused.locator('[data-diagnostic]').textContent()).resolves.toMatch(/^budget: the delegation tree's children budget of 1 is spent/)
    await expect(page.locator('.node[data-state="not-started"]', { hasText: '"too late"' }).locator('[data-diagnostic]').textContent()).resolves.toMatch(/^budget: /)
    expect(await page.locator('.node').count()).toBe(4)
    // Each bar says whose it is and how it stands.
    expect(await page.locator('[data-bar-label]').allTextContents()).toEqual(['root · completed', '"first" · completed', '"refused" · not started', '"too late" · not started'])
    // The list shows the prompt's first line as text: no element made of it, its escape shown as a symbol.
    const entry = page.locator(`.run[data-run="${budgeted}"]`)
    await expect(entry.locator('[data-prompt]').textContent()).resolves.toBe('review <img src=x onerror="window.pwned=1"> \u241b[31mnow')
    await expect(entry.textContent()).resolves.toContain('3 children')
    expect(await page.locator('#runs img').count()).toBe(0)
    expect(await page.evaluate(() => (window as unknown as { pwned?: number }).pwned)).toBeUndefined()
    await expect(entry.getAttribute('href')).resolves.toBe(`#run=${encodeURIComponent(budgeted)}`)
    mkdirSync(artifacts, { recursive: true })
    await page.screenshot({ path: join(artifacts, 'dsh-ui-not-started.png'), fullPage: true })
    // Following another run's link opens it and changes the address; going back opens the first again.
    await page.locator(`.run[data-run="${hello}"]`).click()
    await page.locator(`.node[data-node="${hello}"]`).waitFor()
    expect(new URL(page.url()).hash).toBe(`#run=${encodeURIComponent(hello)}`)
    await page.goBack()
    await page.locator(`.node[data-node="${budgeted}"]`).waitFor()
    await page.locator('#transcript-title', { hasText: budgeted }).waitFor()
  }, 90_000)

  it('a torn or corrupt session file is listed as unreadable and the rest are shown', async () => {
    const sessions = tempDir()
    const good = await runDsh(['run', '--model', 'scripted:examples/hello.yml', '--session-dir', sessions, '--quiet', 'hello'])
    expect(good.code).toBe(0)
    writeFileSync(join(sessions, 'broken-session.jsonl'), '{"kind":"header"\n')
    const url = await startUi(sessions)
    const body = (await (await fetch(`${new URL(url).origin}/api/runs${new URL(url).search}`)).json()) as { runs: unknown[]; unreadable: Array<{ file: string }> }
    expect(body.runs).toHaveLength(1)
    expect(body.unreadable.map((entry) => entry.file)).toEqual(['broken-session.jsonl'])
  })
})
