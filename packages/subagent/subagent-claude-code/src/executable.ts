/**
 * Where the Claude Code binary comes from: the platform package the Agent SDK installs as
 * an optional dependency, found next to the SDK itself. Never from PATH: a `claude` on
 * PATH may be any version, and the SDK's protocol is pinned to its own binary.
 */
import { existsSync } from 'node:fs'
import { createRequire } from 'node:module'
import { dirname, join } from 'node:path'

const SDK_PACKAGE = '@anthropic-ai/claude-agent-sdk'

/**
 * Why this provider cannot run here, as one line naming what to install; `undefined` when
 * the Agent SDK is installed. The SDK (and the native binary it brings) is an optional
 * peer dependency: a default install of dsh leaves it out.
 */
export function missingClaudeCodePackage(): string | undefined {
  const requireHere = createRequire(import.meta.url)
  try {
    requireHere.resolve(SDK_PACKAGE)
    return undefined
  } catch {
    const { peerDependencies } = requireHere('../package.json') as { peerDependencies: Record<string, string> }
    return `${SDK_PACKAGE} is not installed (an optional peer of @dsh/subagent-claude-code): npm install ${SDK_PACKAGE}@${peerDependencies[SDK_PACKAGE]} (with -g for a global dsh)`
  }
}

/** The platform packages to try, in order (the same order the SDK uses). */
export function platformPackages(platform: NodeJS.Platform = process.platform, arch: string = process.arch, musl = isMusl()): string[] {
  if (platform === 'linux') {
    const glibc = `${SDK_PACKAGE}-linux-${arch}`
    return musl ? [`${glibc}-musl`, glibc] : [glibc, `${glibc}-musl`]
  }
  return [`${SDK_PACKAGE}-${platform}-${arch}`]
}

/** The installed binary's absolute path, or `undefined` when no platform package is installed. */
export function resolveClaudeExecutable(): string | undefined {
  const requireHere = createRequire(import.meta.url)
  let fromSdk: NodeJS.Require
  try {
    fromSdk = createRequire(requireHere.resolve(SDK_PACKAGE))
  } catch {
    // The SDK itself is missing: nothing to resolve against; the caller reports it.
    return undefined
  }
  const binary = process.platform === 'win32' ? 'claude.exe' : 'claude'
  for (const name of platformPackages()) {
    try {
      const candidate = join(dirname(fromSdk.resolve(`${name}/package.json`)), binary)
      if (existsSync(candidate)) return candidate
    } catch {
      // Not installed for this platform variant: try the next one.
    }
  }
  return undefined
}

function isMusl(): boolean {
  if (process.platform !== 'linux') return false
  const report = process.report?.getReport() as { header?: { glibcVersionRuntime?: string } } | undefined
  return report?.header?.glibcVersionRuntime === undefined
}
