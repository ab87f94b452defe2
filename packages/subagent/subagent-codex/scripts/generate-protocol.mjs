#!/usr/bin/env node
/**
 * Regenerates `src/protocol/` from the pinned Codex binary:
 *
 *   npm run generate:protocol -w @dsh/subagent-codex            (rewrite src/protocol/)
 *   npm run generate:protocol -w @dsh/subagent-codex -- --check (exit 1 when it is stale)
 *
 * `codex app-server generate-ts` emits the whole protocol (about 800 files). The provider
 * uses a handful of types, so only the ROOTS below and the files they import (their
 * transitive closure) are copied, byte for byte after a provenance header. Nothing in
 * `src/protocol/` is written by hand: to use another protocol type, add it to ROOTS and
 * run this again.
 */
import { spawnSync } from 'node:child_process'
import { existsSync, mkdirSync, mkdtempSync, readdirSync, readFileSync, rmSync, writeFileSync } from 'node:fs'
import { createRequire } from 'node:module'
import { tmpdir } from 'node:os'
import { dirname, join, posix, relative, resolve } from 'node:path'
import { fileURLToPath } from 'node:url'

/** The generated types the provider imports, as paths under the generator's output (no `.ts`). */
const ROOTS = [
  'InitializeParams',
  'InitializeResponse',
  'RequestId',
  'ServerRequest',
  'ApplyPatchApprovalResponse',
  'ExecCommandApprovalResponse',
  'v2/ThreadStartParams',
  'v2/AskForApproval',
  'v2/SandboxMode',
  'v2/ThreadStartResponse',
  'v2/ThreadResumeParams',
  'v2/ThreadResumeResponse',
  'v2/TurnStartParams',
  'v2/TurnStartResponse',
  'v2/TurnInterruptParams',
  'v2/TurnInterruptResponse',
  'v2/AgentMessageDeltaNotification',
  'v2/ItemStartedNotification',
  'v2/ItemCompletedNotification',
  'v2/ThreadTokenUsageUpdatedNotification',
  'v2/TurnPlanUpdatedNotification',
  'v2/TurnCompletedNotification',
  'v2/TurnStatus',
  'v2/ThreadItem',
  'v2/ErrorNotification',
  'v2/CommandExecutionRequestApprovalResponse',
  'v2/FileChangeRequestApprovalResponse',
  'v2/PermissionsRequestApprovalResponse',
  'v2/McpServerElicitationRequestResponse',
  'v2/GetAccountParams',
  'v2/GetAccountResponse',
]

const packageDir = resolve(dirname(fileURLToPath(import.meta.url)), '..')
const outDir = join(packageDir, 'src/protocol')
const check = process.argv.includes('--check')

const require = createRequire(join(packageDir, 'package.json'))
const codexPackageJson = require.resolve('@openai/codex/package.json')
const codexVersion = JSON.parse(readFileSync(codexPackageJson, 'utf8')).version
const codexEntry = join(dirname(codexPackageJson), 'bin/codex.js')

const header = [
  `// Copied from \`codex app-server generate-ts\` of @openai/codex ${codexVersion}`,
  '// by `npm run generate:protocol` (scripts/generate-protocol.mjs). Do not edit: regenerate.',
  '',
].join('\n')

const generated = generate()
try {
  const files = closure(generated, ROOTS)
  const wanted = new Map(files.map((file) => [`${file}.ts`, header + readFileSync(join(generated, `${file}.ts`), 'utf8')]))
  wanted.set('index.ts', header + ROOTS.map((root) => `export type { ${posix.basename(root)} } from './${root}'\n`).join(''))
  if (check) process.exit(compare(wanted) ? 0 : 1)
  rmSync(outDir, { recursive: true, force: true })
  for (const [file, text] of wanted) {
    mkdirSync(dirname(join(outDir, file)), { recursive: true })
    writeFileSync(join(outDir, file), text)
  }
  console.log(`src/protocol: ${wanted.size} files from @openai/codex ${codexVersion}`)
} finally {
  rmSync(generated, { recursive: true, force: true })
}

/** Runs the generator into a temp dir, with a throw-away CODEX_HOME so no user config is read or written. */
function generate() {
  const scratch = mkdtempSync(join(tmpdir(), 'codex-protocol-'))
  const home = join(scratch, 'home')
  const out = join(scratch, 'out')
  mkdirSync(home)
  const result = spawnSync(process.execPath, [codexEntry, 'app-server', 'generate-ts', '--out', out], {
    env: { PATH: process.env.PATH ?? '', HOME: home, CODEX_HOME: home },
    encoding: 'utf8',
  })
  if (result.status !== 0) {
    rmSync(scratch, { recursive: true, force: true })
    throw new Error(`codex app-server generate-ts failed (exit ${result.status}): ${result.stderr}`)
  }
  return out
}

/** The roots and every file they import, transitively (imports are `import type … from "./X"`). */
function closure(root, roots) {
  const seen = new Set()
  const visit = (file) => {
    if (seen.has(file)) return
    const path = join(root, `${file}.ts`)
    if (!existsSync(path)) throw new Error(`generate-ts produced no ${file}.ts: is ROOTS out of date for codex ${codexVersion}?`)
    seen.add(file)
    for (const [, target] of readFileSync(path, 'utf8').matchAll(/from "(\.{1,2}\/[^"]+)"/g)) {
      visit(relative(root, join(dirname(path), target)).split('\\').join('/'))
    }
  }
  roots.forEach(visit)
  return [...seen].sort()
}

/** True when src/protocol holds exactly `wanted`; lists every difference otherwise. */
function compare(wanted) {
  const present = existsSync(outDir) ? listFiles(outDir) : []
  const problems = []
  for (const file of present) if (!wanted.has(file)) problems.push(`extra: ${file}`)
  for (const [file, text] of wanted) {
    const path = join(outDir, file)
    if (!existsSync(path)) problems.push(`missing: ${file}`)
    else if (readFileSync(path, 'utf8') !== text) problems.push(`differs: ${file}`)
  }
  if (problems.length) console.error(`src/protocol is stale for @openai/codex ${codexVersion} (run npm run generate:protocol):\n  ${problems.join('\n  ')}`)
  return problems.length === 0
}

function listFiles(dir, prefix = '') {
  return readdirSync(dir, { withFileTypes: true }).flatMap((entry) =>
    entry.isDirectory() ? listFiles(join(dir, entry.name), `${prefix}${entry.name}/`) : [`${prefix}${entry.name}`],
  )
}
