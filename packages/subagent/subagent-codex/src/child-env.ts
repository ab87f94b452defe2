/**
 * The app-server's environment: the parent's minus anything shaped like a credential,
 * plus the configured `env`. Codex is another program with its own trust boundary; it
 * gets a key only when the deployment hands it one on purpose (`env`, `passEnv`, or
 * `codex login` into its `CODEX_HOME`).
 */

/** Names a credential usually hides behind (`OPENAI_API_KEY`, `GH_TOKEN`, `DB_PASSWORD`, …). */
const CREDENTIAL_SHAPED = /KEY|TOKEN|SECRET|PASSWORD/i

export function isCredentialName(name: string): boolean {
  return CREDENTIAL_SHAPED.test(name)
}

/**
 * `parent` without credential-shaped names (except those `passEnv` names exactly), then
 * `configured` on top: a configured name is kept whatever its shape.
 */
export function childEnvironment(parent: NodeJS.ProcessEnv, configured: Readonly<Record<string, string>>, passEnv: readonly string[] = []): NodeJS.ProcessEnv {
  const passed = new Set(passEnv)
  const env: NodeJS.ProcessEnv = {}
  for (const [name, value] of Object.entries(parent)) {
    if (value !== undefined && (passed.has(name) || !isCredentialName(name))) env[name] = value
  }
  return { ...env, ...configured }
}
