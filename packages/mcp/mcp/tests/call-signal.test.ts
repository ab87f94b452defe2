/**
 * A turn's many MCP calls share its one abort signal: each call must leave nothing on it
 * (the SDK adds a listener to the signal it is given and never removes it), yet an abort
 * of the turn still cancels the call that runs.
 */
import { getEventListeners } from 'node:events'
import { afterEach, describe, expect, it } from 'vitest'
import { ServerConnection } from '@dsh/mcp'
import { FIXTURE } from './mcp-harness.js'

let connection: ServerConnection | undefined
afterEach(async () => {
  await connection?.close()
  connection = undefined
})

const connect = () => ServerConnection.connect({ name: 'srv', config: { command: process.execPath, args: [FIXTURE] }, from: 'the mcp entry' }, { env: process.env, startTimeoutMs: 5000, expand: true })

describe('the abort signal of a turn', () => {
  it('is left with no listener after many calls', async () => {
    connection = await connect()
    const turn = new AbortController()
    for (let i = 0; i < 30; i++) {
      const result = await connection.call('echo', { text: `call ${i}` }, 5000, turn.signal)
      expect(result.content).toEqual([{ type: 'text', text: `echo: call ${i}` }])
    }
    expect(getEventListeners(turn.signal, 'abort')).toHaveLength(0)
  })

  it('still cancels the call that runs when the turn is aborted', async () => {
    connection = await connect()
    const turn = new AbortController()
    const hanging = connection.call('hang', {}, 60_000, turn.signal)
    turn.abort(new Error('the user pressed stop'))
    await expect(hanging).rejects.toThrow('the user pressed stop')
    expect(getEventListeners(turn.signal, 'abort')).toHaveLength(0)
  })
})
