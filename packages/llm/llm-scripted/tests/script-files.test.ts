import { utimesSync, writeFileSync } from 'node:fs'
import { basename, dirname, relative } from 'node:path'
import { afterAll, describe, expect, it } from 'vitest'
import { ScriptedAdapter, ScriptError } from '../src/index.js'
import { collect, removeTempScripts, requestFor, scriptedContext, tempScript, textOfChunks } from './harness.js'

afterAll(removeTempScripts)

describe('script files', () => {
  it('loads a YAML script named by the model spec', async () => {
    const path = tempScript('demo.yml', [
      '- when: { prompt: list }',
      '  reply:',
      '    - text: Let me look.',
      '      call: { tool: ls, args: { dir: . } }',
      '    - text: "Found: {{last_tool_result}}"',
    ].join('\n'))
    const { ask } = await scriptedContext()
    const chunks = await ask(`scripted:${path}`, { prompt: 'list files' })
    expect(textOfChunks(chunks)).toBe('Let me look.')
    expect(chunks.find((chunk) => chunk.type === 'tool-call')).toMatchObject({ call: { name: 'ls', args: { dir: '.' } } })
  })

  it('loads a JSON script in the { rules: [...] } form', async () => {
    const path = tempScript('demo.json', JSON.stringify({ rules: [{ when: { depth: 0 }, reply: [{ text: 'from json' }] }] }))
    const { ask } = await scriptedContext()
    expect(textOfChunks(await ask(`scripted:${path}`))).toBe('from json')
  })

  it('resolves a relative script path against the working directory', async () => {
    const path = tempScript('relative.yaml', '- reply: [{ text: relative }]')
    const { ask } = await scriptedContext()
    expect(textOfChunks(await ask(`scripted:${relative(process.cwd(), path)}`))).toBe('relative')
  })

  it('prefers an inline script over a file of the same name', async () => {
    const path = tempScript('shadowed.yml', '- reply: [{ text: from file }]')
    const { ask } = await scriptedContext({ scripts: { [path]: [{ reply: [{ text: 'from inline' }] }] } })
    expect(textOfChunks(await ask(`scripted:${path}`))).toBe('from inline')
  })

  it('re-reads a script whose file changed, once the recheck interval has passed', async () => {
    const path = tempScript('edited.yml', '- reply: [{ text: before }]')
    const adapter = new ScriptedAdapter({ recheckMs: 0 })
    expect(textOfChunks(await collect(adapter.stream(requestFor(path, { sessionId: 'a' }))))).toBe('before')
    writeFileSync(path, '- reply: [{ text: after }]')
    utimesSync(path, new Date(), new Date(Date.now() + 5000))
    expect(textOfChunks(await collect(adapter.stream(requestFor(path, { sessionId: 'b' }))))).toBe('after')
  })

  it('does not stat the file again within the recheck interval', async () => {
    const path = tempScript('cached.yml', '- reply: [{ text: cached }]')
    const adapter = new ScriptedAdapter({ recheckMs: 60_000 })
    await collect(adapter.stream(requestFor(path, { sessionId: 'a' })))
    writeFileSync(path, 'not: [valid')
    expect(textOfChunks(await collect(adapter.stream(requestFor(path, { sessionId: 'b' }))))).toBe('cached')
  })

  it('a missing script file fails with an LlmError naming the path', async () => {
    const { ask } = await scriptedContext()
    const missing = `${dirname(tempScript('x.yml', ''))}/nope.yml`
    const failure = await ask(`scripted:${missing}`).catch((error: unknown) => error)
    expect(failure).toBeInstanceOf(ScriptError)
    expect(failure).toMatchObject({ code: 'UNREADABLE_SCRIPT' })
    expect((failure as Error).message).toContain(missing)
  })
})

describe('malformed scripts', () => {
  const cases: [name: string, fileName: string, text: string, expected: string][] = [
    ['a script that is not a list', 'map.yml', 'hello: world', ': a script must be a list of rules'],
    ['a rule without reply', 'noreply.yml', '- when: { prompt: x }', ': rules[0]: missing "reply"'],
    ['an unknown reply key', 'typo.yml', '- reply: [{ text: ok }]\n- reply: [{ txt: oops }]', ': rules[1].reply[0]: unknown key "txt"'],
    ['a bad regex', 'regex.yml', '- when: { prompt: "(unclosed" }\n  reply: [{ text: x }]', ': rules[0].when.prompt: invalid regular expression'],
    ['a call without tool', 'call.yml', '- reply: [{ call: { args: {} } }]', ': rules[0].reply[0].call: missing "tool"'],
    ['a non-integer delay', 'delay.yml', '- reply: [{ text: x, delay_ms: 1.5 }]', ': rules[0].reply[0].delay_ms: must be an integer >= 0, got 1.5'],
    ['a non-integer depth', 'depth.yml', '- when: { depth: one }\n  reply: [{ text: x }]', ': rules[0].when.depth: must be an integer >= 0, got "one"'],
    ['args that are not an object', 'args.yml', '- reply: [{ call: { tool: t, args: [1] } }]', ': rules[0].reply[0].call.args: must be an object, got a list'],
    ['a parallel call missing its tool', 'calls.yml', '- reply: [{ calls: [{ tool: a }, { args: {} }] }]', ': rules[0].reply[0].calls[1]: missing "tool"'],
    ['an error mixed with text', 'mixed.yml', '- reply: [{ error: boom, text: hi }]', ': rules[0].reply[0]: "error" cannot be combined'],
    ['a reply with nothing to say', 'empty.yml', '- reply: [{ delay_ms: 5 }]', ': rules[0].reply[0]: a reply needs text, call, calls, error or finish'],
    ['an empty reply list', 'nolist.yml', '- reply: []', ': rules[0].reply: must list at least one reply'],
    ['invalid YAML', 'broken.yml', '- reply: [unclosed', ': invalid YAML:'],
    ['invalid JSON', 'broken.json', '[{"reply": ', ': invalid JSON:'],
  ]

  it.each(cases)('%s fails naming the file and the bad element', async (_name, fileName, text, expected) => {
    const path = tempScript(fileName, text)
    const adapter = new ScriptedAdapter()
    const failure = await collect(adapter.stream(requestFor(path))).catch((error: unknown) => error)
    expect(failure).toBeInstanceOf(ScriptError)
    expect(failure).toMatchObject({ code: 'INVALID_SCRIPT' })
    const message = (failure as Error).message
    expect(message.startsWith(path)).toBe(true)
    expect(message).toContain(basename(path) + expected)
  })
})
