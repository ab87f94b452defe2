/**
 * The environment a Claude Code child gets: the parent's, minus anything that looks like a
 * credential, plus what the deployment configured. Claude Code reads its model endpoint
 * and key from the environment, so the deployment passes them explicitly (`env`, or
 * `passEnv` to let named variables through) instead of the child inheriting every secret
 * the parent happens to hold.
 */

/** Names that look like credentials are never inherited unless `passEnv` names them. */
export const CREDENTIAL_SHAPED = /KEY|TOKEN|SECRET|PASSWORD/i

export interface ChildEnvOptions {
  /** Configured variables, applied last (they win over everything inherited). */
  env: Readonly<Record<string, string>>
  /** Credential-shaped parent variables to inherit anyway, by exact name. */
  passEnv: readonly string[]
  /** Whether this process runs as root (uid 0). */
  isRoot: boolean
}

export function childEnvironment(parent: NodeJS.ProcessEnv, options: ChildEnvOptions): Record<string, string> {
  const passed = new Set(options.passEnv)
  const env: Record<string, string> = {}
  for (const [name, value] of Object.entries(parent)) {
    if (value === undefined) continue
    if (CREDENTIAL_SHAPED.test(name) && !passed.has(name)) continue
    env[name] = value
  }
  Object.assign(env, options.env)
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
