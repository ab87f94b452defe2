/**
 * How `dsh chat` reads prompts without a terminal (`PipedPrompts`): one a line as the input
 * arrives, however it is cut into chunks; a trailing `\` going on to the next line; blank
 * lines skipped; a prompt past the bound refused in one line and never held; bytes that are
 * not UTF-8 read as U+FFFD; and the input read no faster than prompts are taken.
 */
import { PassThrough } from 'node:stream'
import { describe, expect, it } from 'vitest'
import type { PromptRead } from '../src/chat/line-editor.js'
import { PipedPrompts } from '../src/chat/piped.js'

function piped(maxPromptBytes?: number) {
  const input = new PassThrough()
  const refusals: string[] = []
  const prompts = new PipedPrompts({ input, refused: (line) => refusals.push(line), ...(maxPromptBytes !== undefined && { maxPromptBytes }) })
  return { input, prompts, refusals }
}

/** Every read until the end. */
async function all(prompts: PipedPrompts): Promise<PromptRead[]> {
  const reads: PromptRead[] = []
  for (;;) {
    const read = await prompts.read()
    reads.push(read)
    if (read.kind === 'end') return reads
  }
}

const texts = (reads: PromptRead[]) => reads.map((read) => (read.kind === 'prompt' ? read.text : `<${read.kind}>`))

describe('dsh chat from a pipe: the prompts', () => {
  it('are one a line, whatever the chunks, with blank lines skipped and a last line without its line break sent', async () => {
    const { input, prompts } = piped()
    const reads = all(prompts)
    for (const chunk of ['fir', 'st\n\n   \nsec', 'ond\r\n', '/tree\nlast']) input.write(chunk)
    input.end()
    expect(texts(await reads)).toEqual(['first', 'second', '/tree', 'last', '<end>'])
  })

  it('go on to the next line after a trailing backslash, and the end of input ends one still going on', async () => {
    const { input, prompts } = piped()
    const reads = all(prompts)
    input.end('what should we do \\\nanswer in one line\r\nsingle\nkept \\\r\ngoing \\')
    expect(texts(await reads)).toEqual(['what should we do \nanswer in one line', 'single', 'kept \ngoing ', '<end>'])
  })

  it('read bytes that are not UTF-8 as U+FFFD and a character cut between chunks whole; control characters are dropped', async () => {
    const { input, prompts } = piped()
    const reads = all(prompts)
    const euro = Buffer.from('€')
    input.write(Buffer.concat([Buffer.from('price '), euro.subarray(0, 1)]))
    input.write(Buffer.concat([euro.subarray(1), Buffer.from(' \x1b[31mred\x07\n'), Buffer.from([0x62, 0xff, 0x61, 0x0a])]))
    input.end()
    expect(texts(await reads)).toEqual(['price € red', 'b\uFFFDa', '<end>'])
  })

  it('refuse a prompt past the bound in one line, continued or in one long line, and go on with the next', async () => {
    const { input, prompts, refusals } = piped(64)
    const reads = all(prompts)
    input.write('small\n')
    input.write(`${'a'.repeat(40)}\\\n${'b'.repeat(40)}\n`)
    // A line past the bound before its end arrives is counted, not kept.
    for (let index = 0; index < 10; index++) input.write('c'.repeat(50))
    input.write('\nafter\n')
    input.end()
    expect(texts(await reads)).toEqual(['small', 'after', '<end>'])
    expect(refusals).toEqual([
      'dsh: a prompt of 81 bytes was refused: one holds at most 64 bytes; put the text in a file and name the file in your prompt',
      'dsh: a prompt of 500 bytes was refused: one holds at most 64 bytes; put the text in a file and name the file in your prompt',
    ])
  })

  it('leave the input paused while a prompt read waits to be taken, and read on when it is', async () => {
    const { input, prompts } = piped()
    input.write('one\ntwo\n')
    await new Promise((resolve) => setImmediate(resolve))
    expect(input.isPaused()).toBe(true)
    expect(texts([await prompts.read()])).toEqual(['one'])
    expect(texts([await prompts.read()])).toEqual(['two'])
    const third = prompts.read()
    expect(input.isPaused()).toBe(false)
    input.end('three\n')
    expect(texts([await third, await prompts.read()])).toEqual(['three', '<end>'])
  })

  it('end at end(): a read waiting ends, and what is still in the input is not read', async () => {
    const { input, prompts } = piped()
    input.write('one\ntwo\n')
    expect(texts([await prompts.read()])).toEqual(['one'])
    prompts.end()
    expect(texts([await prompts.read()])).toEqual(['<end>'])
    const { prompts: waiting } = piped()
    const read = waiting.read()
    waiting.end()
    expect(texts([await read])).toEqual(['<end>'])
  })
})
