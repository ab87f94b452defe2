/**
 * A worker that goes silent without closing its connection (here: a real `dsh a2a serve`
 * stopped with SIGSTOP, as a network partition would look) ends the run `error` once its
 * keep-alives stop, and is skipped for the next runs. Needs the built CLI (`npx tsc -b`).
 */
import { spawn, type ChildProcess } from 'node:child_process'
import { mkdtempSync, rmSync, writeFileSync } from 'node:fs'
import { tmpdir } from 'node:os'
import { dirname, join, resolve } from 'node:path'
import { fileURLToPath } from 'node:url'
import { afterEach, describe, expect, it } from 'vitest'
import { A2aProvider, SILENT_PERIODS } from '@dsh/subagent-a2a'
import { KEEPALIVE_INTERVAL_MS } from '@dsh/a2a-server'
import { parentWith, until, type Parent } from './helpers.js'

const repoRoot = resolve(dirname(fileURLToPath(import.meta.url)), '../../../..')
const dshMain = join(repoRoot, 'packages/cli/dsh/dist/main.js')

const cleanups: Array<() => Promise<void> | void> = []
afterEach(async () => {
  for (const cleanup of cleanups.splice(0).reverse()) await cleanup()
})

function tempDir(): string {
  const dir = mkdtempSync(join(tmpdir(), 'dsh-a2a-silence-'))
  cleanups.push(() => rmSync(dir, { recursive: true, force: true }))
  return dir
}

/** `dsh a2a serve` as a real process; resolves with its URL once it printed it. */
async function serve(script: string): Promise<{ child: ChildProcess; url: string }> {
  const dir = tempDir()
  const scriptFile = join(dir, 'worker.yml')
  writeFileSync(scriptFile, script)
  const child = spawn(process.execPath, [dshMain, 'a2a', 'serve', '--port', '0', '--model', `scripted:${scriptFile}`, '--session-dir', join(dir, 'sessions')], { cwd: repoRoot, env: { ...process.env, DSH_HOME: join(dir, 'home') }, stdio: ['ignore', 'pipe', 'pipe'] })
  const exited = new Promise<void>((resolvePromise) => child.on('close', () => resolvePromise()))
  cleanups.push(async () => {
    // A stopped process must be continued for SIGKILL's exit to be reaped promptly.
    child.kill('SIGCONT')
    child.kill('SIGKILL')
    await exited
  })
  let stdout = ''
  let stderr = ''
  child.stdout!.on('data', (chunk: Buffer) => (stdout += chunk))
  child.stderr!.on('data', (chunk: Buffer) => (stderr += chunk))
  await until(() => {
    if (child.exitCode !== null) throw new Error(`dsh a2a serve exited ${child.exitCode}: ${stderr}`)
    return stdout.includes('\n')
  })
  return { child, url: stdout.trim() }
}

describe('a worker that goes silent', () => {
  it('a worker stopped with SIGSTOP mid-task ends the run error naming the worker and the silence, and is skipped for the next runs', async () => {
    const worker = await serve('- reply: [{ text: "never", delay_ms: 600000 }]\n')
    const p: Parent = await parentWith({ urls: [worker.url] })
    cleanups.push(() => p.harness.dispose())
    const run = await p.harness.ctx.subagents.start('a2a', p.request('work for a long time'))
    cleanups.push(() => run.dispose())
    worker.child.kill('SIGSTOP')
    const result = await run.result
    expect(result.stopReason).toBe('error')
    expect(result.diagnostic).toContain(worker.url)
    expect(result.diagnostic).toMatch(new RegExp(`went silent during task \\S+: nothing for \\d+ ms, more than ${SILENT_PERIODS} of its ${KEEPALIVE_INTERVAL_MS} ms keep-alive periods.*skipped for the next runs`))
    expect((p.harness.ctx.subagents.getProvider('a2a') as A2aProvider).pool.workers[0]!.unreachableSince).toBeDefined()
  })
})
