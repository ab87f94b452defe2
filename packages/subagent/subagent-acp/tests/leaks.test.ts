import { afterEach, describe, expect, it } from 'vitest'
import { text } from '@dsh/llm'
import { fixture, liveChildren, openFds, setup, type Setup } from './helpers.js'

let current: Setup | undefined
afterEach(async () => {
  await current?.harness.dispose()
  current = undefined
})

describe('acp: no leaks', () => {
  it('50 sequential runs leave no process and no open file descriptor behind', async () => {
    current = await setup({ command: process.execPath, args: [fixture('raw-agent.mjs')] })
    const { harness, request } = current
    const once = async () => {
      const run = await harness.ctx.subagents.start('acp', request('x'))
      expect(await run.result).toEqual({ output: [text('raw answer')], stopReason: 'completed' })
      await run.dispose()
    }
    // The first run loads modules and opens whatever Node opens lazily once.
    await once()
    const fds = openFds()
    const children = liveChildren()
    for (let i = 0; i < 50; i++) await once()
    expect(liveChildren()).toEqual(children)
    expect(openFds()).toBe(fds)
  }, 60_000)
})
