#!/usr/bin/env node
/**
 * Puts in npm's cache every third-party package the installed-release test
 * (packages/cli/dsh/tests/installed.test.ts) installs, so that test installs with
 * `--offline` and never reaches the registry while tests run. Run once after `npm ci`
 * (`.ci/run` does); it installs the packed workspaces, the optional Codex and Claude Agent
 * SDKs and the embed example's compiler into a throw-away project, taking from the
 * registry only what the cache lacks. Exits non-zero, naming the step, when it fails.
 */
import { spawnSync } from 'node:child_process'
import { mkdirSync, mkdtempSync, readdirSync, readFileSync, rmSync, writeFileSync } from 'node:fs'
import { tmpdir } from 'node:os'
import { dirname, join } from 'node:path'
import { fileURLToPath } from 'node:url'

const repoRoot = join(dirname(fileURLToPath(import.meta.url)), '..')
const manifest = (path) => JSON.parse(readFileSync(join(repoRoot, path, 'package.json'), 'utf8'))

const extra = [
  `@openai/codex@${manifest('packages/subagent/subagent-codex').peerDependencies['@openai/codex']}`,
  `@anthropic-ai/claude-agent-sdk@${manifest('packages/subagent/subagent-claude-code').peerDependencies['@anthropic-ai/claude-agent-sdk']}`,
  ...Object.entries(manifest('examples/embed').devDependencies).map(([name, version]) => `${name}@${version}`),
]

const scratch = mkdtempSync(join(tmpdir(), 'dsh-warm-cache-'))
try {
  const packs = join(scratch, 'packs')
  step('npm pack --workspaces', ['pack', '--workspaces', '--pack-destination', packs, '--loglevel=error'], repoRoot, 300_000, { mkdir: packs })
  const tarballs = readdirSync(packs).map((name) => join(packs, name))
  const project = join(scratch, 'project')
  step('npm install of the tarballs and the optional SDKs', ['install', ...tarballs, ...extra, '--prefer-offline', '--no-audit', '--no-fund', '--loglevel=error'], project, 900_000, {
    mkdir: project,
    packageJson: { name: 'dsh-warm-cache', version: '1.0.0', private: true },
  })
  // The test also installs the tarballs globally, with no lockfile: npm resolves that tree on
  // its own (it can pick a newer release of a shared dependency than the project install
  // did), so the same global install is made here once for its packages to be cached.
  step('npm install -g of the tarballs', ['install', '-g', '--prefix', join(scratch, 'global'), ...tarballs, '--prefer-offline', '--no-audit', '--no-fund', '--loglevel=error'], scratch, 900_000)
  console.log(`npm cache: ready for an offline install of ${tarballs.length} tarballs and ${extra.join(', ')}`)
} catch (error) {
  console.error(`warm-npm-cache: ${error.message}`)
  process.exitCode = 1
} finally {
  rmSync(scratch, { recursive: true, force: true, maxRetries: 3 })
}

function step(name, args, cwd, timeout, { mkdir, packageJson } = {}) {
  if (mkdir) mkdirSync(mkdir, { recursive: true })
  if (packageJson) writeFileSync(join(cwd, 'package.json'), `${JSON.stringify(packageJson)}\n`)
  // Without the npm_* variables of an `npm test` or `npm run` around us, which would point npm at the repository.
  const env = Object.fromEntries(Object.entries(process.env).filter(([key]) => !/^npm_/i.test(key)))
  const result = spawnSync('npm', args, { cwd, env, timeout, stdio: ['ignore', 'ignore', 'inherit'] })
  if (result.status !== 0) throw new Error(`step "${name}" failed (${result.error ? result.error.message : `exit ${result.status ?? result.signal}`})`)
}
