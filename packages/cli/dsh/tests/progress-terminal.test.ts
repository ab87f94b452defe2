/**
 * The live terminal view against a small model of a screen that understands what the view
 * writes (newlines, `ESC[nF` to go up n rows, `ESC[J` to clear below, colour codes): what
 * stays on screen after streamed text, notices and stderr lines while the tree redraws.
 */
import { afterEach, describe, expect, it } from 'vitest'
import { createHarness, type Harness } from '@dsh/testkit/harness'
import { columnWidth } from '@dsh/subagent'
import { NO_COLOR_PALETTE, palette } from '../src/progress/colors.js'
import { LiveTerminal } from '../src/progress/terminal.js'
import { ProgressTracker } from '../src/progress/tracker.js'

let harness: Harness | undefined
let view: LiveTerminal | undefined
afterEach(async () => {
  view?.stop()
  view = undefined
  await harness?.dispose()
  harness = undefined
})

/** A screen of `columns` that applies what is written to it; rows wider than it would wrap, which the tests forbid. */
class Screen {
  rows: string[] = ['']
  cursor = 0
  widest = 0
  constructor(readonly columns: number) {}

  write = (chunk: string | Uint8Array): boolean => {
    const text = typeof chunk === 'string' ? chunk : Buffer.from(chunk).toString('utf8')
    for (const token of text.match(/\x1b\[\d*[A-Za-z]|\n|[^\x1b\n]+/g) ?? []) {
      const move = /^\x1b\[(\d*)([A-Za-z])$/.exec(token)
      if (move?.[2] === 'F') this.cursor = Math.max(0, this.cursor - Number(move[1] || 1))
      else if (move?.[2] === 'J') {
        // `ESC[nF` left the cursor at the start of its row: that row and all below are cleared.
        this.rows.length = this.cursor + 1
        this.rows[this.cursor] = ''
      } else if (move) continue // colour
      else if (token === '\n') {
        this.cursor++
        this.rows[this.cursor] ??= ''
      } else {
        this.rows[this.cursor] += token
        this.widest = Math.max(this.widest, columnWidth(this.rows[this.cursor]!))
      }
    }
    return true
  }

  text(): string[] {
    return this.rows.slice(0, this.rows.at(-1) === '' ? -1 : undefined)
  }
}

function terminal(screen: Screen): NodeJS.WriteStream {
  return { write: screen.write, columns: screen.columns } as unknown as NodeJS.WriteStream
}

async function rootTracker(): Promise<ProgressTracker> {
  harness = await createHarness({})
  return new ProgressTracker(harness.ctx, await harness.agent(), () => 1_000)
}

describe('the live terminal view', () => {
  it('streamed text wraps by words within the width, above one copy of the tree, however it is cut into pieces', async () => {
    const screen = new Screen(30)
    view = new LiveTerminal({ out: terminal(screen), palette: NO_COLOR_PALETTE, tracker: await rootTracker(), intervalMs: 60_000 })
    const text = 'The quick brown fox jumps over the lazy dog, then it streams a second sentence.\nA new line.'
    for (let at = 0; at < text.length; at += 3) view.text(text.slice(at, at + 3))
    view.stop()
    expect(screen.widest).toBeLessThan(30)
    expect(screen.text()).toEqual([
      'The quick brown fox jumps',
      'over the lazy dog, then it',
      'streams a second sentence.',
      'A new line.',
      '',
      expect.stringMatching(/^… dsh {2}running/),
    ])
  })

  it('a line written to stderr while the tree is live goes above it, and stderr is given back at the end', async () => {
    const screen = new Screen(60)
    const errors: string[] = []
    const stderr = { write: (chunk: string) => errors.push(chunk) } as unknown as NodeJS.WriteStream
    const original = stderr.write
    view = new LiveTerminal({ out: terminal(screen), palette: NO_COLOR_PALETTE, tracker: await rootTracker(), stderr, intervalMs: 60_000 })
    view.text('half a row')
    stderr.write('[warn] subagents: budget warning: 80% of it\n[warn] part')
    stderr.write('ial line\n')
    view.draw()
    view.stop()
    expect(errors).toEqual([])
    expect(stderr.write).toBe(original)
    expect(screen.text()).toEqual(['[warn] subagents: budget warning: 80% of it', '[warn] partial line', 'half a row', '', expect.stringMatching(/^… dsh {2}running/)])
  })

  it('control characters in the model\'s text are shown, never sent to the terminal', () => {
    const screen = new Screen(60)
    view = new LiveTerminal({ out: terminal(screen), palette: NO_COLOR_PALETTE, intervalMs: 60_000 })
    view.text('clear\x1b[2Jthe screen\rnow')
    view.stop()
    expect(screen.text()).toEqual(['clear\\x1b[2Jthe screen\\x0dnow'])
  })

  it('paints warnings and errors when the palette does, and nothing when it does not', () => {
    const written: string[] = []
    const out = { write: (chunk: string) => written.push(chunk), columns: 80 } as unknown as NodeJS.WriteStream
    view = new LiveTerminal({ out, palette: palette(true), intervalMs: 60_000 })
    view.note('[warn] subagents: careful')
    view.line('dsh: the turn ended error', 'error')
    view.stop()
    expect(written.join('')).toContain('\x1b[33m[warn] subagents: careful\x1b[0m')
    expect(written.join('')).toContain('\x1b[31mdsh: the turn ended error\x1b[0m')
    const plain: string[] = []
    const plainView = new LiveTerminal({ out: { write: (chunk: string) => plain.push(chunk), columns: 80 } as unknown as NodeJS.WriteStream, palette: NO_COLOR_PALETTE, intervalMs: 60_000 })
    plainView.note('[warn] subagents: careful')
    plainView.line('dsh: the turn ended error', 'error')
    plainView.stop()
    expect(plain.join('')).toBe('[warn] subagents: careful\ndsh: the turn ended error\n')
  })
})
