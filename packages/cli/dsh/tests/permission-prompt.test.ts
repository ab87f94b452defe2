import { PassThrough } from 'node:stream'
import { describe, expect, it } from 'vitest'
import { readAnswer, TYPEAHEAD_GUARD_MS, type PromptTerminal } from '../src/permission-prompt.js'

/** A terminal of real streams: what the user types goes into `input`, the prompt comes out of `output`. */
function terminal() {
  const input = new PassThrough() as unknown as NodeJS.ReadStream
  const output = new PassThrough() as unknown as NodeJS.WriteStream
  let screen = ''
  ;(output as unknown as PassThrough).on('data', (chunk: Buffer) => (screen += chunk.toString()))
  const term: PromptTerminal = { input, output, standAside: () => () => {} }
  return { term, type: (keys: string) => (input as unknown as PassThrough).write(keys), screen: () => screen }
}

const after = (ms: number) => new Promise((resolve) => setTimeout(resolve, ms))

describe('the permission prompt of dsh run', () => {
  it('ignores a key typed before the prompt could be read, and answers with the first one after', async () => {
    const { term, type, screen } = terminal()
    const answer = readAnswer(term, 'dsh wants to run bash: rm -rf build', new AbortController().signal)
    type('y')
    await after(TYPEAHEAD_GUARD_MS + 50)
    type('n')
    expect(await answer).toBe('reject')
    expect(screen()).toContain('rm -rf build → rejected')
  })

  it('ignores several keys arriving at once (a paste, an arrow key)', async () => {
    const { term, type } = terminal()
    const answer = readAnswer(term, 'dsh wants to run bash: make', new AbortController().signal)
    await after(TYPEAHEAD_GUARD_MS + 50)
    type('yes')
    type('\x1b[A')
    type('a')
    expect(await answer).toBe('always')
  })

  it('a withdrawn request stops asking', async () => {
    const { term } = terminal()
    const controller = new AbortController()
    const answer = readAnswer(term, 'dsh wants to run bash: make', controller.signal)
    controller.abort()
    expect(await answer).toBe('cancelled')
  })
})
