/**
 * Hook runs in the web view: a session's `hook/run` events (`@dsh/hooks`: which event, the
 * command, its exit, how long it ran, what it decided) are entries of its transcript, and
 * the page shows each as a line beside the calls, as it shows approvals. A real session
 * file, the real server on 127.0.0.1 and a real Chromium.
 */
import { existsSync, mkdtempSync, realpathSync, writeFileSync } from 'node:fs'
import { tmpdir } from 'node:os'
import { join } from 'node:path'
import { afterEach, describe, expect, it } from 'vitest'
import { chromium, type Browser } from 'playwright-core'
import { FORMAT_VERSION } from '@dsh/session-jsonl'
import { serveUi } from '@dsh/ui-server'
import type { UiServer } from '../src/server.js'

const CHROMIUM = '/usr/bin/chromium'
const GUARD = 'sh guard.sh'
const AUDIT = 'cat >> audit.log'

let server: UiServer | undefined
let browser: Browser | undefined
afterEach(async () => {
  await browser?.close()
  browser = undefined
  await server?.close()
  server = undefined
})

/** A root session whose model tried a force push (a PreToolUse hook blocked it) and then ran a command (an audit hook ran after it). */
function sessionWithHooks(dir: string): string {
  const id = 'hooked-1'
  const call = (callId: string, command: string) => ({ type: 'tool/call', call: { type: 'tool-call', id: callId, name: 'bash', args: { command } } })
  const result = (callId: string, text: string, isError: boolean) => ({ type: 'tool/result', result: { type: 'tool-result', callId, name: 'bash', content: [{ type: 'text', text }], ...(isError && { isError }) } })
  const events = [
    { type: 'turn/start', turn: 1 },
    { type: 'user/message', message: { role: 'user', content: [{ type: 'text', text: 'push my branch' }] } },
    call('call_1', 'git push --force'),
    { type: 'hook/run', event: 'PreToolUse', command: GUARD, exitCode: 2, durationMs: 12, decision: 'block', callId: 'call_1' },
    result('call_1', 'bash was not run: force pushes are refused', true),
    call('call_2', 'echo ok'),
    { type: 'hook/run', event: 'PreToolUse', command: GUARD, exitCode: 0, durationMs: 3, callId: 'call_2' },
    result('call_2', 'ok', false),
    { type: 'turn/end', turn: 1, reason: 'completed' },
    { type: 'hook/run', event: 'PostToolUse', command: AUDIT, exitCode: 1, durationMs: 4, callId: 'call_2', note: 'hook "cat >> audit.log" exited 1' },
  ].map((event, seq) => ({ ...event, seq, ts: 1_000 + seq }))
  const header = { kind: 'header', version: FORMAT_VERSION, header: { id, createdAt: new Date(1_000).toISOString(), cwd: '/' } }
  writeFileSync(join(dir, `${id}.jsonl`), [header, ...events].map((line) => JSON.stringify(line)).join('\n') + '\n')
  return id
}

describe('dsh ui shows hook runs', () => {
  it('a session\'s hook/run events are transcript entries (event, command, exit, duration, decision, call, note), in log order', async () => {
    const dir = realpathSync(mkdtempSync(join(tmpdir(), 'dsh-ui-hooks-')))
    const id = sessionWithHooks(dir)
    server = await serveUi({ sessionDir: dir })
    const { origin, searchParams } = new URL(server.url)
    const body = (await (await fetch(`${origin}/api/transcript/${id}?token=${searchParams.get('token')}`)).json()) as { entries: Array<Record<string, unknown>> }
    expect(body.entries.map((entry) => entry.kind)).toEqual(['user', 'tool-call', 'hook', 'tool-result', 'tool-call', 'hook', 'tool-result', 'turn-end', 'hook'])
    expect(body.entries.filter((entry) => entry.kind === 'hook')).toEqual([
      { kind: 'hook', seq: 3, ts: 1_003, event: 'PreToolUse', command: GUARD, exitCode: 2, durationMs: 12, decision: 'block', callId: 'call_1' },
      { kind: 'hook', seq: 6, ts: 1_006, event: 'PreToolUse', command: GUARD, exitCode: 0, durationMs: 3, callId: 'call_2' },
      { kind: 'hook', seq: 9, ts: 1_009, event: 'PostToolUse', command: AUDIT, exitCode: 1, durationMs: 4, callId: 'call_2', note: 'hook "cat >> audit.log" exited 1' },
    ])
  })

  it('the page shows each run as a line of the transcript: the event and command, then exit, time and decision', async () => {
    if (!existsSync(CHROMIUM)) throw new Error(`${CHROMIUM} is missing: install the Debian package chromium (npm test's preflight does so where it can)`)
    const dir = realpathSync(mkdtempSync(join(tmpdir(), 'dsh-ui-hooks-')))
    sessionWithHooks(dir)
    server = await serveUi({ sessionDir: dir })
    browser = await chromium.launch({ executablePath: CHROMIUM, args: ['--no-sandbox', '--disable-gpu', '--disable-quic', '--no-first-run', '--disable-background-networking', '--disable-component-update', '--disable-sync'] })
    const page = await browser.newPage()
    await page.goto(server.url)
    await page.locator('.run').first().click()
    await page.locator('.node').first().click()
    const hooks = page.locator('.entry.hook')
    await hooks.nth(2).waitFor()
    expect(await hooks.allInnerTexts()).toEqual([
      `PreToolUse hook "${GUARD}" call_1\nexit 2, 12 ms, block`,
      `PreToolUse hook "${GUARD}" call_2\nexit 0, 3 ms`,
      `PostToolUse hook "${AUDIT}" call_2\nexit 1, 4 ms: hook "cat >> audit.log" exited 1`,
    ])
    expect(await page.locator('.entry.hook [data-hook-decision="block"]').count()).toBe(1)
  })
})
