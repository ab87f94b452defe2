import { describe, expect, it } from 'vitest'
import {
  DshError, errorMessage, printable, isRecord, assertNever, parseStopReason, stopReasonOfFinish,
  stopReasonOfAcp, acpStopReasonOfStop, taskStatusOfStop, progressStateOfStop, STOP_REASONS, rejectOnThrow, importOnFirstUse, expandToolEntries, TOOL_NAME_OR_PATTERN, mcpServerOf, mcpToolName,
} from '@dsh/base'

type DemoCode = 'ONE' | 'TWO'
class DemoError extends DshError<DemoCode> {}

describe('errors', () => {
  it('a family subclass gets its name from the class and keeps code, message and cause', () => {
    const cause = new Error('root')
    const error = new DemoError('TWO', 'what to do next', { cause })
    expect(error).toBeInstanceOf(DshError)
    expect(error).toBeInstanceOf(Error)
    expect(error.name).toBe('DemoError')
    expect(error.code).toBe('TWO')
    expect(error.message).toBe('what to do next')
    expect(error.cause).toBe(cause)
  })

  it('errorMessage reads errors, strings, and objects whose toString throws', () => {
    expect(errorMessage(new Error('boom'))).toBe('boom')
    expect(errorMessage('plain')).toBe('plain')
    expect(errorMessage(42)).toBe('42')
    expect(errorMessage({ toString() { throw new Error('no') } })).toBe('[object Object]')
    expect(errorMessage(Object.create(null))).toBe('[object Object]')
  })

  it('printable shows control characters as escapes and keeps newlines and tabs', () => {
    expect(printable('a\u001b]0;x\u0007b\rc\n\td\u009b')).toBe('a\\x1b]0;x\\x07b\\x0dc\n\td\\x9b')
    // A bidi override would show `touch PWN` reversed as something harmless.
    expect(printable('echo "\u202eNWP hcuot" \u2066x\u2069')).toBe('echo "\\u202eNWP hcuot" \\u2066x\\u2069')
  })

  it('isRecord accepts plain objects only', () => {
    expect(isRecord({})).toBe(true)
    expect(isRecord([])).toBe(false)
    expect(isRecord(null)).toBe(false)
    expect(isRecord('x')).toBe(false)
  })

  it('assertNever throws naming the unexpected value', () => {
    expect(() => assertNever('odd' as never, 'reason')).toThrow('unexpected reason: "odd"')
  })
})

describe('outcomes: one vocabulary for how things end', () => {
  it('a content filter ends the turn (and so the child run) as a refusal, which ACP answers as refusal', () => {
    const turn = stopReasonOfFinish('content-filter')
    expect(turn).toBe('refusal')
    expect(acpStopReasonOfStop(turn!, false)).toBe('refusal')
  })

  it('a truncated response ends max-tokens; stop and tool calls do not end the turn', () => {
    expect(stopReasonOfFinish('length')).toBe('max-tokens')
    expect(stopReasonOfFinish('stop')).toBeUndefined()
    expect(stopReasonOfFinish('tool-calls')).toBeUndefined()
  })

  it('older logs that say blocked read as refusal; unknown reasons are rejected', () => {
    expect(parseStopReason('blocked')).toBe('refusal')
    for (const reason of STOP_REASONS) expect(parseStopReason(reason)).toBe(reason)
    expect(parseStopReason('exploded')).toBeUndefined()
  })

  it('ACP stop reasons map both ways; unknown and max_turn_requests are errors', () => {
    expect(stopReasonOfAcp('end_turn')).toBe('completed')
    expect(stopReasonOfAcp('cancelled')).toBe('aborted')
    expect(stopReasonOfAcp('max_turn_requests')).toBe('error')
    expect(stopReasonOfAcp('from-the-future')).toBe('error')
    expect(acpStopReasonOfStop('completed', true)).toBe('cancelled')
    expect(acpStopReasonOfStop('error', false)).toBe('error')
  })

  it('every stop reason has a task status and a tree state', () => {
    expect(STOP_REASONS.map(taskStatusOfStop)).toEqual(['completed', 'killed', 'failed', 'failed', 'failed', 'failed'])
    expect(STOP_REASONS.map(progressStateOfStop)).toEqual(['done', 'cancelled', 'failed', 'failed', 'failed', 'failed'])
  })
})

describe('rejectOnThrow', () => {
  it('turns a synchronous throw into a rejection and passes a returned promise through as it is', async () => {
    const thrown = new Error('refused')
    let result: Promise<unknown> | undefined
    expect(() => {
      result = rejectOnThrow(() => {
        throw thrown
      })
    }).not.toThrow()
    await expect(result).rejects.toBe(thrown)
    const answered = Promise.resolve('answer')
    expect(rejectOnThrow(() => answered)).toBe(answered)
  })
})

describe('importOnFirstUse', () => {
  it('imports on the first load only, once however often it is asked, and is loaded only once the import finished', async () => {
    let imports = 0
    const module = { name: 'sdk' }
    const sdk = importOnFirstUse(async () => {
      imports++
      return module
    })
    expect(imports).toBe(0)
    expect(sdk.loaded()).toBeUndefined()
    const first = sdk.load()
    expect(sdk.load()).toBe(first)
    expect(sdk.loaded()).toBeUndefined()
    expect(await first).toBe(module)
    expect(await sdk.load()).toBe(module)
    expect(sdk.loaded()).toBe(module)
    expect(imports).toBe(1)
  })

  it('a failed import stays failed, and nothing counts as loaded', async () => {
    let imports = 0
    const sdk = importOnFirstUse(() => {
      imports++
      return Promise.reject(new Error('Cannot find module'))
    })
    await expect(sdk.load()).rejects.toThrow('Cannot find module')
    await expect(sdk.load()).rejects.toThrow('Cannot find module')
    expect(sdk.loaded()).toBeUndefined()
    expect(imports).toBe(1)
  })
})

describe('MCP tool names', () => {
  it('mcpServerOf reads back the server of what mcpToolName makes, and nothing from any other name', () => {
    expect(mcpServerOf(mcpToolName('docs_srv', 'read_file'))).toBe('docs_srv')
    expect(mcpServerOf('mcp__github__get__issue')).toBe('github')
    for (const name of ['bash', 'mcp__', 'mcp__github', 'mcp__github__', 'mcp____x', 'xmcp__a__b']) expect(mcpServerOf(name), name).toBeUndefined()
  })
})

describe('tool lists with patterns', () => {
  it('a name ending in * names every known tool that starts so, each once, and a pattern naming none adds none', () => {
    const known = ['read', 'mcp__github__get_issue', 'mcp__github__create_issue', 'mcp__githubx__other']
    expect(expandToolEntries(['read', 'mcp__github__*', 'mcp__github__get_issue'], known)).toEqual(['read', 'mcp__github__get_issue', 'mcp__github__create_issue'])
    expect(expandToolEntries(['mcp__gone__*'], known)).toEqual([])
    expect(TOOL_NAME_OR_PATTERN.test('mcp__github__*')).toBe(true)
    expect(TOOL_NAME_OR_PATTERN.test('*')).toBe(false)
    expect(TOOL_NAME_OR_PATTERN.test('mcp__*__x')).toBe(false)
  })
})
