/**
 * What of the HTTP transport a host reads without starting it: the endpoint's path, the
 * session bound, and the checks on who may connect. Kept apart from `http.ts` so that
 * reading them (or serving over stdio) does not load the SDK's HTTP server.
 */
import { timingSafeEqual } from 'node:crypto'
import { networkInterfaces, type NetworkInterfaceInfo } from 'node:os'
import { isWildcardAddress } from '@dsh/base'

/** The path of the MCP endpoint. */
export const MCP_PATH = '/mcp'

/**
 * Client sessions kept at once by default. Many clients never end theirs (no DELETE), so at
 * the bound a new session takes the place of the one idle longest (no request in flight:
 * its next request gets 404 and it initializes again); only when every session is busy is
 * an initialize refused (503).
 */
export const MAX_SESSIONS = 64

export function isLoopback(host: string): boolean {
  return host === 'localhost' || host === '::1' || /^127\.\d+\.\d+\.\d+$/.test(host)
}

/** Whether `header` is `Bearer <token>` (the scheme in any case), compared in constant time. */
export function carriesBearer(header: string | undefined, token: string): boolean {
  const credentials = /^bearer +(.*)$/i.exec(header ?? '')?.[1]
  if (credentials === undefined) return false
  const given = Buffer.from(credentials)
  const expected = Buffer.from(token)
  return given.length === expected.length && timingSafeEqual(given, expected)
}

/**
 * The `host:port` names a server listening on the wildcard `host` is reached by from other
 * machines: its interfaces' addresses (IPv4 ones for `0.0.0.0`, every one for `::`), for
 * `servedHostNames` to accept as `Host` (else a client elsewhere addressing it by this
 * machine's address is refused as a rebinding page would be) and for the printed URL. The
 * first is the one a remote client is shown. Link-local IPv6 addresses are left out (a
 * `Host` naming one carries a zone). Empty for any other `host`.
 */
export function interfaceHostNames(host: string, port: number, interfaces: NodeJS.Dict<NetworkInterfaceInfo[]> = networkInterfaces()): string[] {
  if (!isWildcardAddress(host.replace(/^\[(.*)\]$/, '$1'))) return []
  const ipv6Too = host.includes(':')
  const names: string[] = []
  for (const info of Object.values(interfaces).flat()) {
    if (info === undefined || info.internal) continue
    if (info.family === 'IPv4') names.push(`${info.address}:${port}`)
    else if (ipv6Too && !info.address.toLowerCase().startsWith('fe80:')) names.push(`[${info.address}]:${port}`)
  }
  return names
}
