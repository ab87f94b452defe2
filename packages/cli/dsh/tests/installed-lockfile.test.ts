/**
 * The committed package-lock.json is what `npm install` writes, so installing from a clone
 * leaves it alone (scripts/lockfile-check.mjs, on a copy: the checkout is never touched).
 */
import { cpSync, readFileSync, writeFileSync } from 'node:fs'
import { join } from 'node:path'
import { describe, expect, it } from 'vitest'
import { repoRoot, tempDir } from './cli.js'
import { run } from './installed.js'

const check = (root: string) => run(process.execPath, [join(repoRoot, 'scripts', 'lockfile-check.mjs'), '--root', root], { cwd: root, env: process.env, timeoutMs: 200_000 })

describe('package-lock.json', { timeout: 240_000 }, () => {
  it('npm install leaves the committed lockfile as it is', async () => {
    const result = await check(repoRoot)
    expect(result.stderr).toBe('')
    expect(result).toMatchObject({ code: 0, stdout: 'lockfile-check: npm install leaves package-lock.json as it is\n' })
  })

  it('a lockfile npm would rewrite (a workspace entry edited out of npm\'s order) is refused, naming the entry and what to do', async () => {
    const copy = tempDir('dsh-lockfile-')
    const lock = JSON.parse(readFileSync(join(repoRoot, 'package-lock.json'), 'utf8')) as { packages: Record<string, { dependencies?: Record<string, string> }> }
    // The workspaces the lockfile knows (one being added in this checkout would be a change of its own).
    const workspaces = Object.keys(lock.packages).filter((key) => key.startsWith('packages/')).map((dir) => join(dir, 'package.json'))
    for (const path of ['package.json', ...workspaces]) cpSync(join(repoRoot, path), join(copy, path))
    const entry = lock.packages['packages/acp/acp-server']
    // The same dependencies, in another order: what a hand edit or a merge leaves.
    entry.dependencies = Object.fromEntries(Object.entries(entry.dependencies!).reverse())
    writeFileSync(join(copy, 'package-lock.json'), `${JSON.stringify(lock, null, 2)}\n`)
    const result = await check(copy)
    expect(result.code).toBe(1)
    expect(result.stderr.trim().split('\n')).toHaveLength(1)
    expect(result.stderr).toMatch(/^lockfile-check: npm install rewrites package-lock\.json \(.*packages\/acp\/acp-server.*\); run npm install and commit package-lock\.json/)
  })
})
