/**
 * Where the pinned Codex lives. Always the `@openai/codex` package this provider depends
 * on, never whatever `codex` is first on PATH: the protocol types in `src/protocol/` were
 * generated from exactly that version.
 */
import { existsSync, readFileSync } from 'node:fs'
import { createRequire } from 'node:module'
import { dirname, join } from 'node:path'
import { errorMessage } from '@dsh/base'
import { SubagentError } from '@dsh/subagent'

export interface CodexCommand {
  command: string
  /** Arguments before `app-server`. */
  args: string[]
  version: string
}

/**
 * The platform packages `@openai/codex` ships its native binary in (the same table as its
 * `bin/codex.js`). Running the binary directly spares a Node wrapper process, so signals and
 * exit codes are the server's own.
 */
const NATIVE_TARGETS: Record<string, { triple: string; pkg: string }> = {
  'linux-x64': { triple: 'x86_64-unknown-linux-musl', pkg: '@openai/codex-linux-x64' },
  'linux-arm64': { triple: 'aarch64-unknown-linux-musl', pkg: '@openai/codex-linux-arm64' },
  'darwin-x64': { triple: 'x86_64-apple-darwin', pkg: '@openai/codex-darwin-x64' },
  'darwin-arm64': { triple: 'aarch64-apple-darwin', pkg: '@openai/codex-darwin-arm64' },
  'win32-x64': { triple: 'x86_64-pc-windows-msvc', pkg: '@openai/codex-win32-x64' },
  'win32-arm64': { triple: 'aarch64-pc-windows-msvc', pkg: '@openai/codex-win32-arm64' },
}

let resolved: CodexCommand | undefined

const CODEX_PACKAGE = '@openai/codex'

/**
 * Why this provider cannot run here, as one line naming what to install; `undefined` when
 * `@openai/codex` is installed. Codex (and its native binary) is an optional peer
 * dependency: a default install of dsh leaves it out.
 */
export function missingCodexPackage(): string | undefined {
  const requireHere = createRequire(import.meta.url)
  try {
    requireHere.resolve(`${CODEX_PACKAGE}/package.json`)
    return undefined
  } catch {
    const { peerDependencies } = requireHere('../package.json') as { peerDependencies: Record<string, string> }
    return `${CODEX_PACKAGE} is not installed (an optional peer of @dsh/subagent-codex): npm install ${CODEX_PACKAGE}@${peerDependencies[CODEX_PACKAGE]} (with -g for a global dsh)`
  }
}

/** The pinned Codex: its native binary when the platform package is installed, else its `bin/codex.js` under this Node. */
export function codexCommand(): CodexCommand {
  resolved ??= resolveCodexCommand()
  return resolved
}

function resolveCodexCommand(): CodexCommand {
  const requireHere = createRequire(import.meta.url)
  let packageJson: string
  try {
    packageJson = requireHere.resolve('@openai/codex/package.json')
  } catch (error) {
    throw new SubagentError('START_FAILED', `the @openai/codex package is not installed next to @dsh/subagent-codex (${errorMessage(error)}); run npm install`)
  }
  const version = (JSON.parse(readFileSync(packageJson, 'utf8')) as { version: string }).version
  const target = NATIVE_TARGETS[`${process.platform}-${process.arch}`]
  if (target) {
    try {
      // Resolved from @openai/codex itself: the platform package is its optional dependency.
      const platformJson = createRequire(packageJson).resolve(`${target.pkg}/package.json`)
      const binary = join(dirname(platformJson), 'vendor', target.triple, 'bin', process.platform === 'win32' ? 'codex.exe' : 'codex')
      if (existsSync(binary)) return { command: binary, args: [], version }
    } catch {
      // The optional platform package is missing: fall through to the package's own launcher,
      // which looks in its other places and says how to reinstall when it finds nothing.
    }
  }
  return { command: process.execPath, args: [join(dirname(packageJson), 'bin', 'codex.js')], version }
}
