/**
 * Where a vendor's key may go. A vendor's key variable (`DEEPSEEK_API_KEY`,
 * `ANTHROPIC_API_KEY`) is a default for that vendor's own origin alone: any other base URL
 * (a proxy, a local server, a look-alike host) must name its own variable, so a key is
 * never sent somewhere because a config line was left out. Every adapter asks this one check.
 */

/** A vendor's own API: its origin (scheme, host and port) and the variable its key is in. */
export interface VendorKey {
  origin: string
  keyEnv: string
}

/** Whether `baseURL` is at `origin` (any path under it); a URL that does not parse is not. */
export function isAtOrigin(baseURL: string, origin: string): boolean {
  try {
    return new URL(baseURL).origin === origin
  } catch {
    return false
  }
}

/**
 * The key variable of an endpoint, or `undefined` when its config must name one: the
 * configured `apiKeyEnv` if any, else the vendor's variable for the vendor's own origin only.
 */
export function keyEnvFor(config: { baseURL: string; apiKeyEnv?: string | undefined }, vendor: VendorKey): string | undefined {
  if (config.apiKeyEnv !== undefined) return config.apiKeyEnv
  return isAtOrigin(config.baseURL, vendor.origin) ? vendor.keyEnv : undefined
}
