import { readFileSync, readdirSync, writeFileSync } from 'node:fs'
import { join } from 'node:path'
import { describe, expect, it } from 'vitest'
import { runDsh, tempDir } from './cli.js'

function script(dir: string, yaml: string): string {
  const file = join(dir, 'script.yml')
  writeFileSync(file, yaml)
  return file
}

describe('dsh run', () => {
  it('streams the scripted answer to stdout and exits 0', async () => {
    const dir = tempDir()
    const file = script(dir, '- reply:\n    - text: "forty-two is the answer"\n')
    const result = await runDsh(['run', '--model', `scripted:${file}`, '--session-dir', dir, 'what is the answer?'])
    expect(result.stderr).toBe('')
    expect(result.code).toBe(0)
    expect(result.stdout.trim()).toBe('forty-two is the answer')
  })

  it('a 2 MB answer reaches stdout whole, and its session is complete on disk, when the command exits', async () => {
    const dir = tempDir()
    const answer = `${'0123456789abcdef'.repeat(128 * 1024)}end`
    const file = script(dir, `- reply:\n    - text: "${answer}"\n`)
    const result = await runDsh(['run', '--model', `scripted:${file}`, '--session-dir', dir, 'say a lot'])
    expect(result.code, result.stderr).toBe(0)
    expect(result.stdout).toBe(`${answer}\n`)
    const [sessionFile] = readdirSync(dir).filter((name) => name.endsWith('.jsonl'))
    const lines = readFileSync(join(dir, sessionFile), 'utf8').split('\n')
    expect(lines.at(-1)).toBe('')
    const events = lines.slice(1, -1).map((line) => JSON.parse(line) as { type: string })
    expect(events.at(-1)?.type).toBe('turn/end')
    expect(lines.some((line) => line.includes(answer))).toBe(true)
  })

  it('exits non-zero with the reason when the turn fails', async () => {
    const dir = tempDir()
    const file = script(dir, '- reply:\n    - error: "upstream exploded"\n')
    const result = await runDsh(['run', '--model', `scripted:${file}`, '--session-dir', dir, 'hi'])
    expect(result.code).toBe(1)
    expect(result.stderr).toContain('the turn ended error: upstream exploded')
  })

  it('without a model or a key says how to get going', async () => {
    const result = await runDsh(['run', 'hello'])
    expect(result.code).toBe(2)
    expect(result.stderr).toContain('no model to run with')
    expect(result.stderr).toContain('DEEPSEEK_API_KEY')
    expect(result.stderr).toContain('scripted:')
  })

  it('--json writes every session event as NDJSON in seq order', async () => {
    const dir = tempDir()
    const file = script(dir, '- reply:\n    - text: "ok"\n')
    const result = await runDsh(['run', '--json', '--model', `scripted:${file}`, '--session-dir', dir, 'hi'])
    expect(result.code).toBe(0)
    const records = result.stdout.trim().split('\n').map((line) => JSON.parse(line) as { kind: string; event?: { type: string; seq: number } })
    expect(records[0].kind).toBe('session/header')
    const events = records.filter((record) => record.kind === 'session/event').map((record) => record.event!)
    expect(events.map((event) => event.type)).toEqual(['turn/start', 'step/start', 'user/message', 'assistant/message', 'step/end', 'turn/end'])
    expect(events.map((event) => event.seq)).toEqual([0, 1, 2, 3, 4, 5])
  })

  it('persists the session to --session-dir and --resume continues it with a new turn', async () => {
    const dir = tempDir()
    // The resumed run continues the rule after the reply its log holds.
    const file = script(dir, '- when: { prompt: first }\n  reply:\n    - text: "one"\n    - text: "two"\n')
    const first = await runDsh(['run', '--model', `scripted:${file}`, '--session-dir', dir, 'first question'])
    expect(first.code).toBe(0)
    const [sessionFile] = readdirSync(dir).filter((name) => name.endsWith('.jsonl'))
    const id = sessionFile.replace(/\.jsonl$/, '')
    const second = await runDsh(['run', '--model', `scripted:${file}`, '--session-dir', dir, '--resume', id, 'second question'])
    expect(second.stderr).toBe('')
    expect(second.code).toBe(0)
    expect(second.stdout).toContain('two')
    const lines = readFileSync(join(dir, sessionFile), 'utf8').trim().split('\n').map((line) => JSON.parse(line) as { type?: string; turn?: number; seq?: number; message?: { content: { text: string }[] } })
    expect(lines.filter((line) => line.type === 'turn/start').map((line) => line.turn)).toEqual([1, 2])
    expect(lines.filter((line) => line.type === 'user/message').map((line) => line.message!.content[0].text)).toEqual(['first question', 'second question'])
    const events = lines.filter((line) => line.type !== undefined)
    expect(events.map((line) => line.seq)).toEqual([...Array(events.length).keys()])
  })

  it('--resume of an unknown session exits 2 saying where it looked, without a stack trace', async () => {
    const dir = tempDir()
    const result = await runDsh(['run', '--resume', 'nope', '--model', 'scripted:examples/hello.yml', '--session-dir', dir, 'hi'])
    expect(result.code).toBe(2)
    expect(result.stderr.trim()).toBe(`dsh run: no stored session nope (looked for ${join(dir, 'nope.jsonl')}); \`dsh sessions list\` shows the stored ones`)
  })

  it('a config entry with a bad key fails at load naming the plugin and the key', async () => {
    const dir = tempDir()
    const config = join(dir, 'dsh.yml')
    writeFileSync(config, '- id: agents\n  name: "@dsh/agent"\n  config:\n    maxSteps: lots\n')
    const result = await runDsh(['run', '--config', config, '--model', 'scripted:x', 'hi'])
    expect(result.code).toBe(2)
    expect(result.stderr).toContain('"agents"')
    expect(result.stderr).toContain('maxSteps')
  })

  it('a config file that is not a list of entries is rejected with the file named', async () => {
    const dir = tempDir()
    const config = join(dir, 'dsh.yml')
    writeFileSync(config, '- id: x\n  nmae: "@dsh/agent"\n')
    const result = await runDsh(['run', '--config', config, '--model', 'scripted:x', 'hi'])
    expect(result.code).toBe(2)
    expect(result.stderr).toContain(`${config}: plugins[0]: unknown key "nmae"`)
  })

  describe('prints the answer chosen by output selection, not every streamed text', () => {
    const stepThenAnswer = (dir: string) => script(dir, [
      '- reply:',
      '    - text: "Let me check first."',
      '      call: { tool: bash, args: { command: "true" } }',
      '    - text: "FINAL ANSWER"',
      '',
    ].join('\n'))

    it('piped with --quiet: only the final answer on stdout', async () => {
      const dir = tempDir()
      const result = await runDsh(['run', '--quiet', '--model', `scripted:${stepThenAnswer(dir)}`, '--session-dir', dir, 'check then answer'])
      expect(result.code, result.stderr).toBe(0)
      expect(result.stdout).toBe('FINAL ANSWER\n')
    })

    it('piped with progress: only the final answer on stdout', async () => {
      const dir = tempDir()
      const result = await runDsh(['run', '--model', `scripted:${stepThenAnswer(dir)}`, '--session-dir', dir, 'check then answer'])
      expect(result.code, result.stderr).toBe(0)
      expect(result.stdout).toBe('FINAL ANSWER\n')
    })

    it('--json: one answer record, last, with the final answer only', async () => {
      const dir = tempDir()
      const result = await runDsh(['run', '--json', '--model', `scripted:${stepThenAnswer(dir)}`, '--session-dir', dir, 'check then answer'])
      expect(result.code, result.stderr).toBe(0)
      const records = result.stdout.trim().split('\n').map((line) => JSON.parse(line) as { kind: string; text?: string })
      expect(records.filter((record) => record.kind === 'answer')).toHaveLength(1)
      expect(records.at(-1)).toMatchObject({ kind: 'answer', text: 'FINAL ANSWER' })
    })
  })
})
