/**
 * What a local HTTP server of dsh (`dsh a2a serve`, `dsh ui`) answers: only requests
 * addressed to it by a name it serves under. A page elsewhere can point a name of its own
 * at 127.0.0.1 (DNS rebinding) and reach a loopback server from the user's browser with
 * the page's name in `Host`, and a page sends its own `Origin`; both are refused here, so
 * a token-less loopback server is not the web's to drive.
 */

/** The `host:port` names (lower case) a server listening on `host`:`port` is reached by. */
export function servedHostNames(host: string, port: number, extra: readonly string[] = []): Set<string> {
  const names = new Set<string>()
  const add = (name: string) => {
    names.add(name.toLowerCase())
    // A browser leaves the scheme's default port out of Host.
    if (port === 80) names.add(name.toLowerCase().replace(/:80$/, ''))
  }
  // The machine's own loopback names always reach a server on it (a wildcard listens there too).
  for (const name of ['127.0.0.1', 'localhost', '[::1]']) add(`${name}:${port}`)
  const bare = host.replace(/^\[(.*)\]$/, '$1')
  if (!isWildcardAddress(bare)) add(`${bare.includes(':') ? `[${bare}]` : bare}:${port}`)
  for (const name of extra) names.add(name.toLowerCase())
  return names
}

/** `0.0.0.0`, `::` (bare, not bracketed): no client addresses a server by it. */
export function isWildcardAddress(host: string): boolean {
  return host === '0.0.0.0' || host === '::' || /^(0+:){7}0+$/.test(host)
}

/**
 * Why a request whose `Host` and `Origin` headers are these is not for this server, as
 * one line; `undefined` when it is. `Origin` is checked only when sent (a browser sends it
 * on a cross-origin request and on every POST); it must be `http://` or `https://` and a
 * served name.
 */
export function hostRefusal(names: ReadonlySet<string>, host: string | undefined, origin: string | string[] | undefined): string | undefined {
  const served = () => [...names].slice(0, 6).join(', ')
  if (host === undefined || host === '') return `the request has no Host header; this server answers requests addressed to ${served()}`
  if (!names.has(host.toLowerCase())) return `the Host header ${JSON.stringify(host.slice(0, 100))} is not an address of this server (${served()}): refused, as a page elsewhere pointing its name here would be`
  if (origin === undefined) return undefined
  const given = Array.isArray(origin) ? origin.join(', ') : origin
  const originHost = /^https?:\/\/([^/]+)$/i.exec(given)?.[1]
  if (originHost === undefined || !names.has(originHost.toLowerCase())) return `the Origin ${JSON.stringify(given.slice(0, 100))} is not this server's own (${served()}): requests from pages elsewhere are refused`
  return undefined
}
