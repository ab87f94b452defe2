import { afterEach, describe, expect, it } from 'vitest'
import { text } from '@dsh/llm'
import { fixture, liveChildren, setup, type Setup } from './helpers.js'

let current: Setup | undefined
afterEach(async () => {
  await current?.harness.dispose()
  current = undefined
})

async function provider(mode: string, config: Record<string, unknown> = {}): Promise<Setup> {
  current = await setup({ command: process.execPath, args: [fixture('agent.mjs'), mode], ...config })
  return current
}

describe('acp: frame limits', () => {
  it('an update over maxFrameBytes ends the run error with a diagnostic naming the limit, keeps what came before, and leaves no process', async () => {
    const { harness, request } = await provider('huge', { maxFrameBytes: 65_536 })
    const before = liveChildren()
    const run = await harness.ctx.subagents.start('acp', request('200000'))
    const result = await run.result
    expect(result).toMatchObject({ stopReason: 'error', output: [text('partial ')] })
    expect(result.diagnostic).toContain('over the 65536-byte frame limit (maxFrameBytes)')
    await run.dispose()
    expect(liveChildren()).toEqual(before)
  })

  it('an update within the limit is read whole', async () => {
    const { harness, request } = await provider('huge', { maxFrameBytes: 65_536 })
    const run = await harness.ctx.subagents.start('acp', request('60000'))
    const result = await run.result
    expect(result.stopReason).toBe('completed')
    expect(result.output[0].text).toHaveLength('partial '.length + 60_000)
    await run.dispose()
  })

  it('a prompt over the limit is refused before the agent is started', async () => {
    const { harness, request } = await provider('echo', { maxFrameBytes: 4096 })
    const before = liveChildren()
    await expect(harness.ctx.subagents.start('acp', request('y'.repeat(5000)))).rejects.toMatchObject({
      code: 'INVALID_REQUEST',
      message: expect.stringContaining('over the 4096-byte frame limit (maxFrameBytes)'),
    })
    expect(liveChildren()).toEqual(before)
  })

  it('maxFrameBytes below 1024 fails the load', async () => {
    await expect(setup({ command: process.execPath, args: [fixture('agent.mjs'), 'echo'], maxFrameBytes: 10 })).rejects.toThrow(/maxFrameBytes/)
  })
})
