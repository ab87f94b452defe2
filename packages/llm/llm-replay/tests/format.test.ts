import { describe, expect, it } from 'vitest'
import { firstDifference, parseRecording } from '@dsh/llm-replay'

const header = '{"recording":"dsh-llm-recording","version":1,"session":"root","prompt":"hi"}'
const request = (call: number, extra = '') => `{"call":${call},"request":{"model":"m",${extra}"messages":{"keep":${call === 0 ? 0 : 1},"add":[{"role":"user","content":[{"type":"text","text":"hi ${call}"}]}]}}}`
const response = (call: number) => `{"call":${call},"response":{"chunks":[{"type":"text-delta","text":"ok"},{"type":"finish","reason":"stop"}],"end":"finish"}}`

describe('reading a recording', () => {
  it('applies the deltas: system and tools carry over, messages keep a prefix and add', () => {
    const text = [header, request(0, '"system":"S","tools":[],'), response(0), request(1), response(1), ''].join('\n')
    const { calls } = parseRecording('/r/root.jsonl', text)
    expect(calls.map((call) => [call.request.system, call.request.messages.length, call.line])).toEqual([['S', 1, 2], ['S', 2, 4]])
  })

  it('a request without its response is a truncated file, named by line', () => {
    const text = [header, request(0, '"system":"S","tools":[],'), ''].join('\n')
    expect(() => parseRecording('/r/root.jsonl', text)).toThrow('/r/root.jsonl:2: call 0 has a request but no response (the file is truncated)')
  })

  it('keeping more messages than the previous call had is refused, naming the line', () => {
    const text = [header, request(0, '"system":"S","tools":[],'), response(0), request(1).replace('"keep":1', '"keep":5'), response(1), ''].join('\n')
    expect(() => parseRecording('/r/root.jsonl', text)).toThrow('/r/root.jsonl:4: call 1: request.messages.keep is 5, but the previous call had 1 messages')
  })

  it('an error code outside the closed union is refused', () => {
    const text = [header, request(0, '"system":"S","tools":[],'), '{"call":0,"response":{"chunks":[],"end":"error","error":{"name":"LlmError","message":"x","code":"MADE_UP"}}}', ''].join('\n')
    expect(() => parseRecording('/r/root.jsonl', text)).toThrow('/r/root.jsonl:3: call 0: response.error.code "MADE_UP" is not an LlmError code')
  })
})

describe('the first difference', () => {
  it('names the path and shows both strings from a little before where they part', () => {
    const recorded = { messages: [{ content: [{ text: `${'a'.repeat(50)} the tests for the release` }] }] }
    const live = { messages: [{ content: [{ text: `${'a'.repeat(50)} the benchmarks for the release` }] }] }
    expect(firstDifference(recorded, live)).toEqual({
      path: 'messages[0].content[0].text',
      recorded: '"…aaaaaaaaaaaaaaa the tests for the release"',
      live: '"…aaaaaaaaaaaaaaa the benchmarks for the release"',
    })
  })

  it('a missing element is a length difference; equal values have none', () => {
    expect(firstDifference({ tools: [1, 2] }, { tools: [1] })).toEqual({ path: 'tools.length', recorded: '2', live: '1' })
    expect(firstDifference({ a: [1, { b: 'c' }] }, { a: [1, { b: 'c' }] })).toBeUndefined()
  })
})
