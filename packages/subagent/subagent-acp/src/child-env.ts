/**
 * The child's environment: the parent's, minus anything that looks like a credential,
 * plus what the deployment configured. A delegated agent is another program with its own
 * trust boundary; it gets a key only when the config hands it one on purpose.
 */

/** Names a credential usually hides behind (`DEEPSEEK_API_KEY`, `GH_TOKEN`, `DB_PASSWORD`, …). */
const CREDENTIAL_SHAPED = /KEY|TOKEN|SECRET|PASSWORD/i

export function isCredentialName(name: string): boolean {
  return CREDENTIAL_SHAPED.test(name)
}

/**
 * `parent` without credential-shaped names, then `configured` on top. A configured
 * variable is kept even when its name is credential-shaped: that is the explicit way to
 * give a child a key.
 */
export function childEnvironment(parent: NodeJS.ProcessEnv, configured: Readonly<Record<string, string>>): NodeJS.ProcessEnv {
  const env: NodeJS.ProcessEnv = {}
  for (const [name, value] of Object.entries(parent)) {
    if (value !== undefined && !isCredentialName(name)) env[name] = value
  }
  return { ...env, ...configured }
}
