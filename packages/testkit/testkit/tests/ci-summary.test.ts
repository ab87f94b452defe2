/**
 * `.ci/run`'s closing line (scripts/test-summary.mjs) against real vitest runs: a scratch
 * project outside the repository's test pattern, run by the repository's own vitest with the
 * JSON reporter `.ci/run` uses. vitest 4 counts a failed hook or a file that did not load in
 * no test, and passes an unhandled error off as a successful report; the line must still say
 * at least 1 failed, and CI must exit non-zero.
 */
import { spawn } from 'node:child_process'
import { mkdtempSync, rmSync, symlinkSync, writeFileSync } from 'node:fs'
import { tmpdir } from 'node:os'
import { join } from 'node:path'
import { fileURLToPath } from 'node:url'
import { afterAll, describe, expect, it } from 'vitest'

const repoRoot = fileURLToPath(new URL('../../../../', import.meta.url))
const summaryScript = join(repoRoot, 'scripts', 'test-summary.mjs')
const vitestBin = join(repoRoot, 'node_modules', 'vitest', 'vitest.mjs')

const scratchDirs: string[] = []
afterAll(() => {
  for (const dir of scratchDirs) rmSync(dir, { recursive: true, force: true })
})

interface Exited {
  code: number | null
  stdout: string
  stderr: string
}

function exec(args: string[], cwd: string): Promise<Exited> {
  // Without the VITEST_* variables of the vitest running us, which would make the inner run think it is a worker.
  const env = Object.fromEntries(Object.entries(process.env).filter(([key]) => !key.startsWith('VITEST')))
  return new Promise((resolve, reject) => {
    const child = spawn(process.execPath, args, { cwd, env, stdio: ['ignore', 'pipe', 'pipe'] })
    let stdout = ''
    let stderr = ''
    child.stdout.on('data', (chunk: Buffer) => (stdout += chunk))
    child.stderr.on('data', (chunk: Buffer) => (stderr += chunk))
    child.on('error', reject)
    child.on('close', (code) => resolve({ code, stdout, stderr }))
  })
}

/** Run vitest over `files` in a scratch project as `.ci/run` does, then the summary over its report and exit status. */
async function ciRun(files: Record<string, string>): Promise<{ vitest: Exited; summary: Exited; lastLine: string }> {
  const dir = mkdtempSync(join(tmpdir(), 'dsh-ci-summary-'))
  scratchDirs.push(dir)
  symlinkSync(join(repoRoot, 'node_modules'), join(dir, 'node_modules'))
  writeFileSync(join(dir, 'vitest.config.mjs'), "export default { test: { include: ['*.test.mjs'] } }\n")
  for (const [name, text] of Object.entries(files)) writeFileSync(join(dir, name), text)
  const report = join(dir, 'report.json')
  const vitest = await exec([vitestBin, 'run', '--reporter=json', `--outputFile=${report}`], dir)
  const summary = await exec([summaryScript, report, String(vitest.code)], dir)
  const lines = summary.stdout.trimEnd().split('\n')
  return { vitest, summary, lastLine: lines[lines.length - 1] }
}

const passing = "import { it, expect } from 'vitest'\nit('passes', () => expect(1).toBe(1))\n"
const LINE = /^(\d+) passed, (\d+) failed$/

const beforeAllFails = "import { beforeAll, describe, it } from 'vitest'\ndescribe('set-up', () => {\n  beforeAll(() => { throw new Error('set-up broke') })\n  it('never runs', () => {})\n})\n"
const afterAllFails = "import { afterAll, it } from 'vitest'\nafterAll(() => { throw new Error('clean-up broke') })\nit('passes first', () => {})\n"
const doesNotLoad = "import './missing.mjs'\nimport { it } from 'vitest'\nit('x', () => {})\n"
const testFails = "import { it, expect } from 'vitest'\nit('fails', () => expect(1).toBe(2))\n"
const unhandled = "import { it } from 'vitest'\nit('leaves a rejection', () => { void Promise.reject(new Error('nobody caught me')) })\n"

// Each case is a whole vitest run (seconds on a busy machine): the three runs start at once.
const runs = {
  failures: ciRun({ 'passing.test.mjs': passing, 'before.test.mjs': beforeAllFails, 'after.test.mjs': afterAllFails, 'broken.test.mjs': doesNotLoad, 'failing.test.mjs': testFails }),
  unhandled: ciRun({ 'unhandled.test.mjs': unhandled }),
  clean: ciRun({ 'passing.test.mjs': passing }),
}
// Settled here so a rejection surfaces in the test that awaits it, not as an unhandled one.
for (const run of Object.values(runs)) run.catch(() => undefined)

describe("scripts/test-summary.mjs, .ci/run's closing line", { timeout: 180_000 }, () => {
  it('failed beforeAll and afterAll hooks and a file that does not load each count as failed, a failed test once; CI exits non-zero', async () => {
    const { vitest, summary, lastLine } = await runs.failures
    expect(vitest.code, vitest.stderr).toBe(1)
    expect(lastLine).toMatch(LINE)
    // passed: passing.test and after.test's test; failed: the failing test, before.test, after.test, broken.test.
    expect(lastLine).toBe('2 passed, 4 failed')
    expect(summary.stdout).toMatch(/outside any test.*before\.test\.mjs/)
    expect(summary.stdout).toMatch(/outside any test.*after\.test\.mjs: clean-up broke/)
    expect(summary.stdout).toMatch(/outside any test.*broken\.test\.mjs/)
    expect(summary.code).toBe(1)
  })

  it('an unhandled error, which vitest reports as a success while exiting 1, says 1 failed', async () => {
    const { vitest, summary, lastLine } = await runs.unhandled
    expect(vitest.code).toBe(1)
    expect(lastLine).toBe('1 passed, 1 failed')
    expect(summary.code).toBe(1)
  })

  it('a clean run says 0 failed and exits 0', async () => {
    const { vitest, summary, lastLine } = await runs.clean
    expect(vitest.code).toBe(0)
    expect(lastLine).toBe('1 passed, 0 failed')
    expect(summary.code).toBe(0)
  })

  it('no report (the build or preflight failed before vitest ran) says 0 passed, 1 failed', async () => {
    const summary = await exec([summaryScript, join(tmpdir(), 'no-such-report.json'), '1'], repoRoot)
    expect(summary.stdout.trimEnd().split('\n').pop()).toBe('0 passed, 1 failed')
    expect(summary.code).toBe(1)
  })
})
