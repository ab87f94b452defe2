import { spawn } from 'node:child_process'
import { createHash } from 'node:crypto'
import { mkdtempSync } from 'node:fs'
import { tmpdir } from 'node:os'
import { dirname, join, resolve } from 'node:path'
import { fileURLToPath } from 'node:url'

export const repoRoot = resolve(dirname(fileURLToPath(import.meta.url)), '../../../..')
/** What ships: the `dsh` executable, which starts the bundled CLI (`npm run build` writes it). */
export const dshBin = join(repoRoot, 'packages/cli/dsh/bin/dsh.cjs')
/** The bundle itself, for tests that look inside it. */
export const dshBundle = join(repoRoot, 'packages/cli/dsh/dist/bundle/dsh-main.cjs')
/**
 * One code cache for every CLI the tests start (each gets its own DSH_HOME, where the cache
 * would otherwise live): the tests run warm, as a user's dsh does. Named after the checkout,
 * so that two checkouts on one machine do not overwrite each other's.
 */
export const testCodeCache = join(tmpdir(), `dsh-test-code-cache-${createHash('sha256').update(repoRoot).digest('hex').slice(0, 12)}`)
// Every process a test starts inherits it, also those spawned with an environment of their own.
process.env.DSH_CODE_CACHE ??= testCodeCache

export interface CliResult {
  code: number | null
  signal: NodeJS.Signals | null
  stdout: string
  stderr: string
}

export function tempDir(prefix = 'dsh-cli-'): string {
  return mkdtempSync(join(tmpdir(), prefix))
}

/** Run the built `dsh` as a real process, with a private DSH_HOME and no model keys but those `env` sets. */
/** `input` is written to its standard input (closed afterwards); without it stdin is closed from the start. */
export function runDsh(args: string[], options: { cwd?: string; env?: NodeJS.ProcessEnv; timeoutMs?: number; input?: string | Buffer } = {}): Promise<CliResult> {
  return new Promise((resolvePromise, reject) => {
    // The machine's model keys never reach a test's dsh; a test that sets one means it.
    const env: NodeJS.ProcessEnv = { ...process.env }
    delete env.DEEPSEEK_API_KEY
    delete env.OPENAI_API_KEY
    Object.assign(env, { DSH_HOME: tempDir('dsh-home-') }, options.env)
    const child = spawn(process.execPath, [dshBin, ...args], { cwd: options.cwd ?? repoRoot, env, stdio: [options.input === undefined ? 'ignore' : 'pipe', 'pipe', 'pipe'] })
    if (options.input !== undefined) child.stdin!.end(options.input)
    let stdout = ''
    let stderr = ''
    child.stdout.on('data', (chunk: Buffer) => (stdout += chunk))
    child.stderr.on('data', (chunk: Buffer) => (stderr += chunk))
    const timer = setTimeout(() => {
      child.kill('SIGKILL')
      reject(new Error(`dsh ${args.join(' ')} did not exit within ${options.timeoutMs ?? 20_000} ms\nstdout: ${stdout}\nstderr: ${stderr}`))
    }, options.timeoutMs ?? 20_000)
    child.on('error', reject)
    child.on('close', (code, signal) => {
      clearTimeout(timer)
      resolvePromise({ code, signal, stdout, stderr })
    })
  })
}
