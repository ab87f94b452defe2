import { symbols } from 'cordis'

/**
 * The service object behind a Cordis context property. Reaching a service through a
 * context goes through tracing proxies that build a fresh shadow context on every method
 * call (about 10 µs each); the turn loop and the delegation path call services many times
 * per step, so they hold the instance itself. Only for calls that do not depend on the
 * caller's context: registrations (effects tied to the caller's plugin) must still go
 * through the context.
 */
export function serviceInstance<T extends object>(service: T): T {
  const original = (service as Record<symbol, unknown>)[symbols.original]
  return (original ?? service) as T
}
