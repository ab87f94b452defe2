/**
 * The page as the run's approval front-end, driven as a person would: a real `dsh run --ui`
 * on a keyless scripted model, whose spawn child wants to run commands and whose plain ACP
 * agent (the subagent-acp fixture, keeping no session here) asks about one too, answered by
 * clicking in Debian's Chromium (playwright-core); what the budgets add is shown from the
 * files of a finished run by `dsh ui`. The test command's preflight installs Chromium where
 * it is missing; without it these tests fail, naming the package.
 */
import { spawn, type ChildProcess } from 'node:child_process'
import { existsSync, mkdirSync, readFileSync, readdirSync, writeFileSync } from 'node:fs'
import { join } from 'node:path'
import { afterEach, describe, expect, it } from 'vitest'
import { chromium, type Browser, type Page } from 'playwright-core'
import { dshBin, repoRoot, runDsh, tempDir } from './cli.js'
import { until } from './processes.js'

const CHROMIUM = '/usr/bin/chromium'
const artifacts = join(repoRoot, 'test-artifacts')
const ACP_FIXTURE = join(repoRoot, 'packages/subagent/subagent-acp/tests/fixtures/agent.mjs')

const started: ChildProcess[] = []
let browser: Browser | undefined
afterEach(async () => {
  await browser?.close()
  browser = undefined
  for (const child of started.splice(0)) if (child.exitCode === null && child.signalCode === null) child.kill('SIGKILL')
})

interface Started {
  child: ChildProcess
  stdout: () => string
  stderr: () => string
  exited: Promise<number | null>
}

/** A dsh process with a private DSH_HOME and no model keys. */
function startDsh(args: string[], cwd: string): Started {
  const env: NodeJS.ProcessEnv = { ...process.env, DSH_HOME: tempDir('dsh-home-') }
  delete env.DEEPSEEK_API_KEY
  delete env.OPENAI_API_KEY
  const child = spawn(process.execPath, [dshBin, ...args], { cwd, env, stdio: ['ignore', 'pipe', 'pipe'] })
  started.push(child)
  let stdout = ''
  let stderr = ''
  child.stdout!.on('data', (chunk: Buffer) => (stdout += chunk))
  child.stderr!.on('data', (chunk: Buffer) => (stderr += chunk))
  const exited = new Promise<number | null>((resolve) => child.on('close', (code) => resolve(code)))
  return { child, stdout: () => stdout, stderr: () => stderr, exited }
}

async function urlPrinted(process: Started, stream: 'stdout' | 'stderr'): Promise<string> {
  const find = () => /http:\/\/127\.0\.0\.1:\d+\/\?token=[0-9a-f]+/.exec(process[stream]())?.[0]
  await until(
    () => find() !== undefined,
    () => (process.child.exitCode !== null ? `dsh exited ${process.child.exitCode} before printing its URL: ${process.stderr()}` : undefined),
  )
  return find()!
}

async function launch(): Promise<Browser> {
  if (!existsSync(CHROMIUM)) throw new Error(`${CHROMIUM} is missing: install the Debian package chromium (npm test's preflight does so where it can)`)
  browser = await chromium.launch({ executablePath: CHROMIUM, args: ['--no-sandbox', '--disable-gpu', '--disable-quic', '--no-first-run', '--disable-background-networking', '--disable-component-update', '--disable-sync'] })
  return browser
}

/** POST an answer as a script elsewhere would; `bearer` false puts the token in the query string only. */
function post(url: string, id: string, body: unknown, options: { bearer: boolean }): Promise<Response> {
  const { origin, searchParams } = new URL(url)
  const token = searchParams.get('token')!
  return fetch(`${origin}/api/approvals/${id}${options.bearer ? '' : `?token=${token}`}`, {
    method: 'POST',
    headers: { 'content-type': 'application/json', ...(options.bearer && { authorization: `Bearer ${token}` }) },
    body: JSON.stringify(body),
  })
}

async function pendingIds(url: string): Promise<string[]> {
  const { origin, search } = new URL(url)
  const body = (await (await fetch(`${origin}/api/approvals${search}`)).json()) as { pending: Array<{ id: string }> }
  return body.pending.map((request) => request.id)
}

/**
 * The root starts two background children in one step under a cap of one: "worker" runs
 * two commands (each asked about: a rule says ask), "later" waits for its slot; then a
 * plain ACP agent is asked to clean up with hostile text in its command.
 */
function approvalRun(dir: string): { config: string; script: string } {
  const script = join(dir, 'script.yml')
  writeFileSync(
    script,
    [
      '- when: { prompt: "do the work" }',
      '  reply:',
      '    - call: { tool: bash, args: { command: "touch rejected-marker" } }',
      '    - call: { tool: bash, args: { command: "touch allowed-marker" } }',
      '    - text: "worker: {{last_tool_result}}"',
      '- when: { prompt: "later work" }',
      '  reply: [{ text: "later done" }]',
      '- when: { depth: 0 }',
      '  reply:',
      '    - calls:',
      '        - { tool: subagent, args: { description: "worker", prompt: "do the work", run_in_background: true } }',
      '        - { tool: subagent, args: { description: "later", prompt: "later work", run_in_background: true } }',
      '    - calls:',
      '        - { tool: task_output, args: { task_id: subagent-1, wait: true } }',
      '        - { tool: task_output, args: { task_id: subagent-2, wait: true } }',
      '    - call: { tool: subagent_acp, args: { description: "cleaner", prompt: "rm -rf build <script>window.pwned=1</script> \\e[31mred" } }',
      '    - text: "root finished"',
      '',
    ].join('\n'),
  )
  const config = join(dir, 'dsh.yml')
  writeFileSync(
    config,
    [
      '- id: subagents',
      '  name: "@dsh/subagent"',
      '  config: { tree: { maxConcurrent: 1 } }',
      '- id: approvals',
      '  name: "@dsh/approvals"',
      '  config: { ask: ["bash(touch *)"] }',
      '- id: subagent-acp',
      '  name: "@dsh/subagent-acp"',
      '  config:',
      '    providerName: acp',
      `    command: ${JSON.stringify(process.execPath)}`,
      `    args: [${JSON.stringify(ACP_FIXTURE)}, permission-wait]`,
      '- id: tool-subagent-acp',
      '  name: "@dsh/tool-subagent"',
      '  config: { provider: acp, toolName: subagent_acp }',
      '',
    ].join('\n'),
  )
  return { config, script }
}

/** The decisions recorded in `dir`'s session files: with each tool result (by command) and as `approval` events. */
function recordedDecisions(dir: string): Array<{ what: string; permission: Record<string, unknown> }> {
  const found: Array<{ what: string; permission: Record<string, unknown> }> = []
  for (const name of readdirSync(dir).filter((file) => file.endsWith('.jsonl'))) {
    const commands = new Map<string, string>()
    for (const line of readFileSync(join(dir, name), 'utf8').trim().split('\n').slice(1)) {
      const event = JSON.parse(line) as { type: string; call?: { id: string; args?: { command?: string } }; result?: { callId: string }; permission?: Record<string, unknown>; request?: { subject: string } }
      if (event.type === 'tool/call' && event.call?.args?.command) commands.set(event.call.id, event.call.args.command)
      if (event.type === 'tool/result' && event.permission) found.push({ what: commands.get(event.result!.callId) ?? '?', permission: event.permission })
      if (event.type === 'approval') found.push({ what: `approval: ${event.request!.subject}`, permission: event.permission! })
    }
  }
  return found
}

async function openRun(page: Page): Promise<void> {
  await page.locator('.run').first().waitFor({ timeout: 20_000 })
  await page.locator('.run').first().click()
}

describe('dsh run --ui: the page answers approvals', () => {
  it('shows a pending request naming its path with the rule and time left; reject leaves the command unrun, allow runs it; answers without the Bearer header or for an id not pending change nothing; the tree shows waiting and queued children', async () => {
    const work = tempDir()
    const sessions = join(work, 'sessions')
    mkdirSync(sessions)
    const { config, script } = approvalRun(work)
    const run = startDsh(['run', '--ui', '--config', config, '--model', `scripted:${script}`, '--session-dir', sessions, 'go'], work)
    const url = await urlPrinted(run, 'stderr')
    expect(run.stderr()).toMatch(/^dsh: the run's page \(approvals are answered there\): http:\/\/127\.0\.0\.1:\d+\/\?token=[0-9a-f]{48}$/m)

    const page = await (await launch()).newPage()
    await page.goto(url)
    await openRun(page)

    // The worker waits for an answer, and its sibling waits for a slot: both shown as such, live.
    const first = page.locator('#approvals .request', { hasText: 'touch rejected-marker' })
    await first.waitFor({ timeout: 20_000 })
    await expect(first.locator('.path').textContent()).resolves.toBe('dsh › spawn "worker"')
    await expect(first.textContent()).resolves.toContain('wants to run bash: touch rejected-marker')
    await expect(first.textContent()).resolves.toContain('asked because the rule bash(touch *) (config) says ask')
    await expect(first.locator('.left').textContent()).resolves.toMatch(/^[45]:\d\d left$/)
    await page.locator('.node[data-state="waiting-for-approval"]', { hasText: '"worker"' }).waitFor({ timeout: 20_000 })
    await page.locator('.node[data-state="queued"]', { hasText: '"later"' }).waitFor({ timeout: 20_000 })
    mkdirSync(artifacts, { recursive: true })
    await page.screenshot({ path: join(artifacts, 'dsh-run-ui-approval.png'), fullPage: true })
    const [firstId] = await pendingIds(url)
    expect(firstId).toMatch(/^approval-\d+$/)

    // The token only in the URL (as a link or a cross-site form would carry it) answers nothing.
    const unauthorised = await post(url, firstId!, { decision: 'allow-once' }, { bearer: false })
    expect(unauthorised.status).toBe(401)
    expect(((await unauthorised.json()) as { error: string }).error).toMatch(/Authorization: Bearer/)
    // Neither does an id never asked, or a body that is not exactly an answer.
    expect((await post(url, 'approval-999', { decision: 'allow-once' }, { bearer: true })).status).toBe(404)
    expect((await post(url, firstId!, { decision: 'allow-once', by: 'someone else' }, { bearer: true })).status).toBe(400)
    expect((await post(url, firstId!, { decision: 'yes' }, { bearer: true })).status).toBe(400)
    expect(await pendingIds(url)).toEqual([firstId])
    expect(existsSync(join(work, 'rejected-marker'))).toBe(false)

    // Reject from the page: the command is not run, and the worker's next request takes its place.
    await first.locator('button[data-answer="reject"]').click()
    const second = page.locator('#approvals .request', { hasText: 'touch allowed-marker' })
    await second.waitFor({ timeout: 20_000 })
    await first.waitFor({ state: 'detached' })
    expect(existsSync(join(work, 'rejected-marker'))).toBe(false)
    // Answering the settled request again is refused and changes nothing.
    const again = await post(url, firstId!, { decision: 'allow-once' }, { bearer: true })
    expect(again.status).toBe(409)
    expect(((await again.json()) as { error: string }).error).toContain('no longer pending')
    expect(await pendingIds(url)).toHaveLength(1)
    expect(existsSync(join(work, 'rejected-marker'))).toBe(false)
    // The worker's transcript shows the decision: who, and when.
    await page.locator('.node', { hasText: '"worker"' }).click()
    await page.locator('.entry.tool-result .decision[data-decision="reject"]', { hasText: 'the user at the dsh run --ui page' }).waitFor({ timeout: 20_000 })

    await second.locator('button[data-answer="allow-once"]').click()
    // Then the plain ACP agent asks, its hostile command shown as text.
    const acp = page.locator('#approvals .request', { hasText: 'dsh › acp "cleaner"' })
    await acp.waitFor({ timeout: 30_000 })
    expect(existsSync(join(work, 'allowed-marker'))).toBe(true)
    await expect(acp.locator('.subject').textContent()).resolves.toBe('rm -rf build <script>window.pwned=1</script> \u241b[31mred')
    expect(await page.evaluate(() => (window as unknown as { pwned?: number }).pwned)).toBeUndefined()
    await acp.locator('button[data-answer="reject"]').click()

    expect(await run.exited, run.stderr()).toBe(0)
    expect(run.stdout()).toContain('root finished')
    expect(existsSync(join(work, 'rejected-marker'))).toBe(false)
    const decisions = recordedDecisions(sessions)
    const by = 'the user at the dsh run --ui page'
    expect(decisions.find((entry) => entry.what === 'touch rejected-marker')?.permission).toMatchObject({ decision: 'reject', by, source: 'user', at: expect.any(Number) })
    expect(decisions.find((entry) => entry.what === 'touch allowed-marker')?.permission).toMatchObject({ decision: 'allow-once', by, source: 'user', at: expect.any(Number) })
    expect(decisions.find((entry) => entry.what.startsWith('approval: rm -rf build'))?.permission).toMatchObject({ decision: 'reject', by, source: 'user' })

    // After the run, `dsh ui` shows the ACP agent's decision in its parent's transcript.
    const ui = startDsh(['ui', '--session-dir', sessions], work)
    await page.goto(await urlPrinted(ui, 'stdout'))
    await openRun(page)
    const approval = page.locator('.entry.approval', { hasText: 'dsh › acp "cleaner"' })
    await approval.waitFor({ timeout: 20_000 })
    await expect(approval.textContent()).resolves.toContain('bash: rm -rf build <script>')
    await approval.locator('.decision[data-decision="reject"][data-source="user"]', { hasText: by }).waitFor()
    // Nothing is pending once the run is gone, and this page answers nothing.
    expect(await page.locator('#approvals .request').count()).toBe(0)
    expect((await post(await urlPrinted(ui, 'stdout'), firstId!, { decision: 'allow-once' }, { bearer: true })).status).toBe(404)
  }, 120_000)

  it('--ui with --permission shows requests without answering them: the default decides', async () => {
    const work = tempDir()
    const sessions = join(work, 'sessions')
    mkdirSync(sessions)
    const script = join(work, 'script.yml')
    writeFileSync(script, ['- when: { depth: 0 }', '  reply:', '    - call: { tool: bash, args: { command: "touch never" } }', '    - text: "done"', ''].join('\n'))
    const result = await runDsh(['run', '--ui', '--permission', 'reject', '--model', `scripted:${script}`, '--session-dir', sessions, 'go'], { cwd: work })
    expect(result.code, result.stderr).toBe(0)
    expect(result.stderr).toMatch(/^dsh: the run's page \(it shows approvals; --permission decides them\): http:\/\/127\.0\.0\.1:\d+\/\?token=/m)
    expect(existsSync(join(work, 'never'))).toBe(false)
    expect(recordedDecisions(sessions)[0]?.permission).toMatchObject({ decision: 'reject', source: 'default', by: 'dsh run --permission reject' })
  })
})

describe('dsh ui: what budgets add', () => {
  it('a child a budget stopped is shown as stopped by budget and one it kept from starting as not started, each with the diagnostic', async () => {
    const work = tempDir()
    const sessions = join(work, 'sessions')
    mkdirSync(sessions)
    const config = join(work, 'dsh.yml')
    writeFileSync(config, ['- id: subagents', '  name: "@dsh/subagent"', '  config: { tree: { budget: { outputTokens: 30 } } }', ''].join('\n'))
    const step = '    - { text: "working through my part, one more step", call: { tool: task_list, args: {} } }'
    const script = join(work, 'script.yml')
    writeFileSync(
      script,
      [
        '- when: { depth: 1 }',
        '  reply:',
        ...Array(6).fill(step),
        '    - text: "part done"',
        '- when: { depth: 0 }',
        '  reply:',
        '    - call: { tool: subagent, args: { description: "spender", prompt: "spend" } }',
        '    - call: { tool: subagent, args: { description: "too late", prompt: "spend more", run_in_background: true } }',
        '    - call: { tool: task_output, args: { task_id: subagent-1, wait: true } }',
        '    - text: "out of budget"',
        '',
      ].join('\n'),
    )
    const result = await runDsh(['run', '--config', config, '--permission', 'allow', '--model', `scripted:${script}`, '--session-dir', sessions, '--quiet', 'go'], { cwd: work, timeoutMs: 60_000 })
    expect(result.code, result.stderr).toBe(0)

    const ui = startDsh(['ui', '--session-dir', sessions], work)
    const page = await (await launch()).newPage()
    await page.goto(await urlPrinted(ui, 'stdout'))
    await openRun(page)
    const spender = page.locator('.node[data-state="stopped-by-budget"]', { hasText: '"spender"' })
    await spender.waitFor({ timeout: 20_000 })
    await expect(spender.locator('[data-diagnostic]').textContent()).resolves.toMatch(/^budget: the delegation tree's output-token budget of 30 is spent/)
    // Kept from starting: not started, saying which budget (a child it stopped after it started is stopped by budget).
    const late = page.locator('.node[data-state="not-started"]', { hasText: '"too late"' })
    await late.waitFor()
    await expect(late.textContent()).resolves.toContain('task subagent-1')
    await expect(late.locator('[data-diagnostic]').textContent()).resolves.toMatch(/^budget: .*no more children start/)
    // Its text says so in words, distinct from a run that ended aborted.
    await expect(spender.locator('.state').textContent()).resolves.toBe('stopped by budget')
    mkdirSync(artifacts, { recursive: true })
    await page.screenshot({ path: join(artifacts, 'dsh-ui-budget.png'), fullPage: true })
  }, 90_000)
})
