/**
 * The CLI's version: `dsh --version`, and what `dsh acp` tells a client in `agentInfo`.
 * The bundler writes it into the bundle (`define`, from this package's package.json), so a
 * start reads no manifest for it; run from the sources (tests, an embedding), it is read
 * from package.json beside them.
 */
import { createRequire } from 'node:module'

/** Filled in by scripts/bundle.mjs; undeclared anywhere else. */
declare const DSH_CLI_VERSION: string | undefined

export function cliVersion(): string {
  if (typeof DSH_CLI_VERSION === 'string') return DSH_CLI_VERSION
  return (createRequire(import.meta.url)('../package.json') as { version: string }).version
}
