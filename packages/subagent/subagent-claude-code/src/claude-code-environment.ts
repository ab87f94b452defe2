/**
 * The environment a Claude Code child gets: the shared child environment (the base
 * allow-list of the parent's, what `passEnv` names, then `env`), with Claude
 * Code's `IS_SANDBOX` rule on top. Claude Code reads its model endpoint and key from the
 * environment, so the deployment passes them explicitly instead of the child inheriting
 * every secret the parent happens to hold.
 */
import { childEnvironment } from '@dsh/process'

interface ClaudeCodeEnvironmentOptions {
  /** Configured variables, applied last (they win over everything inherited). */
  env: Readonly<Record<string, string>>
  /** Parent variables to pass through beyond the base environment, by exact name. */
  passEnv: readonly string[]
  /** Whether this process runs as root (uid 0). */
  isRoot: boolean
}

export function claudeCodeEnvironment(parent: NodeJS.ProcessEnv, options: ClaudeCodeEnvironmentOptions): Record<string, string> {
  // IS_SANDBOX is inherited (then checked below): it says what the machine is, not a secret.
  const env = childEnvironment(parent, { env: options.env, passEnv: [...options.passEnv, 'IS_SANDBOX'], agentChild: true })
  // Claude Code refuses to start as root in bypass mode unless IS_SANDBOX is exactly `1`,
  // and sandboxes commonly export other truthy spellings (`yes`). A configured value is
  // the deployment's explicit choice and stands; otherwise root gets `1`, and a non-root
  // child drops an inherited value that is not `1` rather than pass on a broken one.
  if (!Object.hasOwn(options.env, 'IS_SANDBOX')) {
    if (options.isRoot) env.IS_SANDBOX = '1'
    else if (env.IS_SANDBOX !== undefined && env.IS_SANDBOX !== '1') delete env.IS_SANDBOX
  }
  return env
}

export function runningAsRoot(): boolean {
  return typeof process.getuid === 'function' && process.getuid() === 0
}
