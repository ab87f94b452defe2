import { writeFileSync } from 'node:fs'
import { join } from 'node:path'
import { Context } from 'cordis'
import { describe, expect, it } from 'vitest'
import { compose, CompositionError, type PluginEntry } from '../src/compose.js'
import { tempDir } from './cli.js'

/** Write plugin modules to a scratch directory and return entries naming them by absolute path. */
function plugins(sources: Record<string, string>): PluginEntry[] {
  const dir = tempDir('dsh-compose-')
  return Object.entries(sources).map(([id, source]) => {
    const file = join(dir, `${id}.mjs`)
    writeFileSync(file, source)
    return { id, name: file }
  })
}

/** The error `compose` rejects with. The context is disposed unless a plugin never finished starting (Cordis then cannot unload it). */
async function composeError(entries: PluginEntry[], options: { startTimeoutMs?: number } = {}): Promise<CompositionError> {
  const ctx = new Context()
  let caught: unknown
  try {
    await compose(ctx, entries, options)
  } catch (error) {
    caught = error
  }
  if (!(caught instanceof CompositionError)) throw new Error(`compose did not reject with a CompositionError: ${String(caught)}`)
  if (caught.code !== 'PLUGIN_WAITING' || !caught.message.includes('its start to finish')) await ctx.fiber.dispose()
  return caught
}

describe('composition start-up', () => {
  it('starts a chain of plugins where each waits for a service the previous provides after an async start', async () => {
    const entries = plugins({
      first: `export default { name: 'first', async apply(ctx) { await new Promise((r) => setTimeout(r, 20)); ctx.provide('alpha', { ready: true }) } }`,
      second: `export default { name: 'second', inject: ['alpha'], async apply(ctx) { await new Promise((r) => setTimeout(r, 20)); ctx.provide('beta', { from: ctx.alpha.ready }) } }`,
      third: `export default { name: 'third', inject: ['beta'], apply(ctx) { ctx.provide('gamma', ctx.beta.from) } }`,
    })
    const ctx = new Context()
    const composition = await compose(ctx, entries.reverse())
    expect(ctx.get('gamma')).toBe(true)
    await composition.dispose()
  })

  it('a plugin waiting for a service nobody provides is named with the service, long before the start timeout', async () => {
    const entries = plugins({
      lonely: `export const name = 'lonely'
export const inject = ['nobody']
export function apply() {}`,
      fine: `export const name = 'fine'
export function apply() {}`,
    })
    // The timeout is far beyond any test run: the report must come from the lifecycle events.
    const error = await composeError(entries, { startTimeoutMs: 3_600_000 })
    expect(error).toBeInstanceOf(CompositionError)
    expect(error.code).toBe('PLUGIN_WAITING')
    expect(error.message).toBe(`some plugins did not start: "lonely" (${entries[0].name}) is waiting for ctx.nobody`)
  })

  it('a plugin whose start throws is reported as failed to start with its message', async () => {
    const entries = plugins({
      broken: `export const name = 'broken'
export async function apply() { throw new Error('disk on fire') }`,
    })
    const error = await composeError(entries, { startTimeoutMs: 3_600_000 })
    expect(error.code).toBe('PLUGIN_START')
    expect(error.message).toBe(`plugin "broken" (${entries[0].name}) failed to start: disk on fire`)
  })

  it('a plugin whose start never finishes is reported once the start timeout passes', async () => {
    const entries = plugins({
      stuck: `export default { name: 'stuck', apply() { return new Promise(() => {}) } }`,
    })
    const error = await composeError(entries, { startTimeoutMs: 50 })
    expect(error.code).toBe('PLUGIN_WAITING')
    expect(error.message).toContain('"stuck"')
    expect(error.message).toContain('is waiting for its start to finish')
  })
})
