/**
 * Where push notifications may go: the guard against server-side request forgery. A
 * client names a webhook URL and this server calls it, so without a guard any client
 * could make the server reach what only the server can reach (its loopback, its private
 * network, a cloud's metadata address).
 *
 * - A URL is called only when it matches one of the operator's patterns (`allow`):
 *   `http[s]://HOST[:PORT][/PATH-PREFIX]`, where HOST may start with `*.` (any subdomain,
 *   not the domain itself) and PORT may be `*`; no port means the scheme's default.
 *   None configured: no webhook is ever called, and every config is refused.
 * - Addresses outside the public internet (loopback, private, link-local, carrier-grade
 *   NAT, unspecified, multicast, reserved; IPv4-mapped IPv6 as its IPv4 address) are
 *   refused unless one of the operator's networks (`allowNetworks`, CIDRs) holds them.
 * - At set time the URL is checked against the patterns, and an address written in it
 *   (an IP literal, `localhost`) against the networks: a refused URL is an error the
 *   client receives, and nothing is stored. Names are not resolved then (no lookup goes
 *   out for a URL that may never be called).
 * - At call time the name is resolved and every address it resolves to is checked; the
 *   connection goes only to an address that passed (the check is the lookup the socket
 *   uses, so a name that resolves elsewhere the second time gains nothing). Redirects are
 *   never followed.
 */
import { BlockList, isIP } from 'node:net'
import { lookup as dnsLookup, type LookupAddress } from 'node:dns'
import type { LookupFunction } from 'node:net'
import { A2aServerError } from './errors.js'

export interface WebhookPolicyOptions {
  /** URL patterns a webhook must match (see above). */
  allow?: readonly string[]
  /** Networks (CIDR, or one address) outside the public internet that webhooks may reach. */
  allowNetworks?: readonly string[]
}

interface Pattern {
  source: string
  protocol: 'http:' | 'https:'
  /** Lower-case host; for `*.example.com`, the suffix `.example.com`. */
  host: string
  anySubdomain: boolean
  /** `undefined`: any port. */
  port: string | undefined
  pathPrefix: string
}

/** Ranges that are not the public internet. */
const NON_PUBLIC: ReadonlyArray<[string, number, 'ipv4' | 'ipv6']> = [
  ['0.0.0.0', 8, 'ipv4'],
  ['10.0.0.0', 8, 'ipv4'],
  ['100.64.0.0', 10, 'ipv4'],
  ['127.0.0.0', 8, 'ipv4'],
  ['169.254.0.0', 16, 'ipv4'],
  ['172.16.0.0', 12, 'ipv4'],
  ['192.0.0.0', 24, 'ipv4'],
  ['192.168.0.0', 16, 'ipv4'],
  ['198.18.0.0', 15, 'ipv4'],
  ['224.0.0.0', 4, 'ipv4'],
  ['240.0.0.0', 4, 'ipv4'],
  ['::', 96, 'ipv6'],
  ['::1', 128, 'ipv6'],
  ['64:ff9b::', 96, 'ipv6'],
  ['100::', 64, 'ipv6'],
  ['fc00::', 7, 'ipv6'],
  ['fe80::', 10, 'ipv6'],
  ['ff00::', 8, 'ipv6'],
]

const PATTERN = /^(https?):\/\/(\*\.)?([A-Za-z0-9.-]+|\[[0-9A-Fa-f:.]+\])(?::(\d{1,5}|\*))?(\/[^\s?#]*)?$/
/** Scheme and credentials of `AuthenticationInfo` go in a header: a token, and no line breaks. */
const AUTH_SCHEME = /^[A-Za-z0-9!#$%&'*+.^_`|~-]{1,64}$/
const HEADER_VALUE = /^[\t\x20-\x7e\x80-\xff]*$/

export class WebhookPolicy {
  private readonly patterns: readonly Pattern[]
  private readonly nonPublic = new BlockList()
  private readonly allowed = new BlockList()
  readonly allowsAny: boolean

  constructor(options: WebhookPolicyOptions = {}) {
    this.patterns = (options.allow ?? []).map(parsePattern)
    this.allowsAny = this.patterns.length > 0
    for (const [address, prefix, family] of NON_PUBLIC) this.nonPublic.addSubnet(address, prefix, family)
    for (const network of options.allowNetworks ?? []) {
      const { address, prefix, family } = parseNetwork(network)
      this.allowed.addSubnet(address, prefix, family)
    }
  }

  /** Why a client's push config may not be stored, or `undefined` when it may. */
  refusal(config: { url: string; token?: string; authentication?: { scheme: string; credentials: string } | undefined }): string | undefined {
    if (!this.allowsAny) return 'this worker calls no webhooks (its operator allows none: dsh a2a serve --webhook-allow PATTERN)'
    let url: URL
    try {
      url = new URL(config.url)
    } catch {
      return `the webhook URL ${quote(config.url)} is not a URL`
    }
    if (url.protocol !== 'http:' && url.protocol !== 'https:') return `the webhook URL ${quote(config.url)} is not http or https`
    if (url.username || url.password) return `the webhook URL ${quote(config.url)} carries credentials; put them in authentication instead`
    if (!this.patterns.some((pattern) => matches(pattern, url))) return `the webhook URL ${quote(config.url)} matches none of the URLs this worker may call (its operator allows ${this.patterns.map((pattern) => pattern.source).join(', ')})`
    // `localhost` is refused only when none of its addresses may be reached (the lookup at call time keeps those that may).
    const written = writtenAddresses(url.hostname)
    const blocked = written.every((address) => !this.addressAllowed(address)) ? written[0] : undefined
    if (blocked !== undefined) return `the webhook URL ${quote(config.url)} points at ${blocked}, an address outside the public internet that this worker's operator does not allow (dsh a2a serve --webhook-allow-network CIDR)`
    const auth = config.authentication
    if (auth && (auth.scheme || auth.credentials)) {
      if (!AUTH_SCHEME.test(auth.scheme)) return 'authentication.scheme must be an HTTP authentication scheme name (e.g. Bearer)'
      if (!HEADER_VALUE.test(auth.credentials) || auth.credentials.length > 4096) return 'authentication.credentials must be at most 4096 characters with no line breaks'
    }
    if (config.token && (!HEADER_VALUE.test(config.token) || config.token.length > 4096)) return 'token must be at most 4096 characters with no line breaks'
    return undefined
  }

  /** Whether a webhook may connect to `address` (an IP address). */
  addressAllowed(address: string): boolean {
    const [plain, family] = normalise(address)
    if (family === undefined) return false
    return !this.nonPublic.check(plain, family) || this.allowed.check(plain, family)
  }

  /**
   * The lookup a webhook's socket uses: the name resolved, and only the addresses that
   * pass kept (none: the connection fails, naming the refused addresses).
   */
  readonly lookup: LookupFunction = (hostname, options, callback) => {
    dnsLookup(hostname, { ...options, all: true }, (error, found) => {
      if (error) return callback(error, '', 0)
      const addresses = found as LookupAddress[]
      const usable = addresses.filter((entry) => this.addressAllowed(entry.address))
      if (usable.length === 0) {
        const refused = Object.assign(new Error(`${hostname} resolves to ${addresses.map((entry) => entry.address).join(', ')}, outside the public internet and not allowed by this worker's operator (--webhook-allow-network)`), { code: 'EWEBHOOKREFUSED' })
        return callback(refused, '', 0)
      }
      if (options.all) return (callback as unknown as (error: null, addresses: LookupAddress[]) => void)(null, usable)
      callback(null, usable[0]!.address, usable[0]!.family)
    })
  }
}

function parsePattern(source: string): Pattern {
  const match = PATTERN.exec(source)
  if (!match) throw new A2aServerError('INVALID_OPTION', `webhook pattern ${quote(source)} is not http[s]://HOST[:PORT][/PATH] (HOST may start with "*.", PORT may be "*")`)
  const [, scheme, wildcard, host, port, path] = match
  const protocol = `${scheme}:` as Pattern['protocol']
  if (port !== undefined && port !== '*' && Number(port) > 65_535) throw new A2aServerError('INVALID_OPTION', `webhook pattern ${quote(source)} has port ${port}, above 65535`)
  // The URL parser's spelling of the host (lower case, IPv6 compressed), so matching compares like with like.
  let canonical: string
  try {
    canonical = new URL(`${protocol}//${host}`).hostname
  } catch {
    throw new A2aServerError('INVALID_OPTION', `webhook pattern ${quote(source)} has a host that is not one`)
  }
  const defaultPort = protocol === 'https:' ? '443' : '80'
  return {
    source,
    protocol,
    host: wildcard ? `.${canonical}` : canonical,
    anySubdomain: wildcard !== undefined,
    port: port === '*' ? undefined : port === undefined || port === defaultPort ? '' : String(Number(port)),
    pathPrefix: path ?? '/',
  }
}

function matches(pattern: Pattern, url: URL): boolean {
  if (url.protocol !== pattern.protocol) return false
  const host = url.hostname
  if (pattern.anySubdomain ? !(host.endsWith(pattern.host) && host.length > pattern.host.length) : host !== pattern.host) return false
  // `url.port` is '' for the scheme's default port.
  if (pattern.port !== undefined && url.port !== pattern.port) return false
  return url.pathname.startsWith(pattern.pathPrefix)
}

function parseNetwork(network: string): { address: string; prefix: number; family: 'ipv4' | 'ipv6' } {
  const [address = '', prefixText, ...rest] = network.split('/')
  const family = isIP(address) === 4 ? 'ipv4' : isIP(address) === 6 ? 'ipv6' : undefined
  const max = family === 'ipv4' ? 32 : 128
  const prefix = prefixText === undefined ? max : Number(prefixText)
  if (family === undefined || rest.length > 0 || !Number.isInteger(prefix) || prefix < 0 || prefix > max || (prefixText !== undefined && !/^\d+$/.test(prefixText))) {
    throw new A2aServerError('INVALID_OPTION', `webhook network ${quote(network)} is not an address or a CIDR (e.g. 127.0.0.1/32, 10.0.0.0/8, ::1/128)`)
  }
  return { address, prefix, family }
}

/** The addresses a URL's host names without a lookup: an IP literal, or the loopback addresses for `localhost`. */
function writtenAddresses(hostname: string): string[] {
  // A trailing dot names the same host (`localhost.`).
  const bare = hostname.replace(/^\[|\]$/g, '').replace(/\.$/, '')
  if (isIP(bare)) return [bare]
  if (bare === 'localhost' || bare.endsWith('.localhost')) return ['127.0.0.1', '::1']
  return []
}

/** An address as the block lists check it: IPv4-mapped IPv6 as its IPv4 address. */
function normalise(address: string): [string, 'ipv4' | 'ipv6' | undefined] {
  const bare = address.replace(/^\[|\]$/g, '')
  const family = isIP(bare)
  if (family === 4) return [bare, 'ipv4']
  if (family !== 6) return [bare, undefined]
  const mapped = /^(?:0{0,4}:){0,4}:?(?:0{0,4}:)?ffff:(.+)$/i.exec(bare)?.[1]
  if (mapped !== undefined) {
    if (isIP(mapped) === 4) return [mapped, 'ipv4']
    const hex = /^([0-9a-f]{1,4}):([0-9a-f]{1,4})$/i.exec(mapped)
    if (hex) {
      const high = parseInt(hex[1]!, 16)
      const low = parseInt(hex[2]!, 16)
      return [`${high >> 8}.${high & 255}.${low >> 8}.${low & 255}`, 'ipv4']
    }
  }
  return [bare, 'ipv6']
}

function quote(text: string): string {
  return JSON.stringify(text.length > 200 ? `${text.slice(0, 200)}…` : text)
}
