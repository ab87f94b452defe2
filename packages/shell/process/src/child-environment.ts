/**
 * The environment of a child program: the parent's, minus anything that looks like a
 * credential, plus what the deployment configured. A delegated agent is another program
 * with its own trust boundary; it gets a key only when the config hands it one on
 * purpose (`env`, or `passEnv` to let a named parent variable through).
 */

/** Names a credential usually hides behind (`OPENAI_API_KEY`, `GH_TOKEN`, `CLIENT_SECRET`, `DB_PASSWORD`, …). */
const CREDENTIAL_SHAPED = /KEY|TOKEN|SECRET|PASSWORD/i

export function isCredentialName(name: string): boolean {
  return CREDENTIAL_SHAPED.test(name)
}

export interface ChildEnvironmentOptions {
  /** Variables applied last: they win over everything inherited, whatever their names. */
  env?: Readonly<Record<string, string>>
  /** Credential-shaped parent variables to inherit anyway, by exact name. */
  passEnv?: readonly string[]
}

/**
 * `parent` without unset and credential-shaped names (except those `passEnv` names), then
 * `env` on top. A configured variable is kept even when its name is credential-shaped:
 * that is the explicit way to give a child a key.
 */
export function childEnvironment(parent: NodeJS.ProcessEnv, options: ChildEnvironmentOptions = {}): Record<string, string> {
  const passed = new Set(options.passEnv)
  const env: Record<string, string> = {}
  for (const [name, value] of Object.entries(parent)) {
    if (value !== undefined && (passed.has(name) || !isCredentialName(name))) env[name] = value
  }
  return { ...env, ...options.env }
}
