/**
 * A config file is validated as it is written, whatever the flags say: a flag merged over
 * a bad value (`--session-dir` over `session-jsonl`'s `dir: 5`) does not hide it, so `dsh
 * config check` and every run refuse the same file in the same line, before any session.
 */
import { existsSync, readdirSync, rmSync, writeFileSync } from 'node:fs'
import { join } from 'node:path'
import { afterEach, beforeEach, describe, expect, it } from 'vitest'
import { runDsh, tempDir } from './cli.js'

let dir: string
beforeEach(() => {
  dir = tempDir('dsh-as-written-')
})
afterEach(() => rmSync(dir, { recursive: true, force: true }))

/** Each: the file's entry, the flag over its bad value (and whether `config check` takes it), the line every command says. */
const cases: Array<[what: string, entry: string, flags: () => string[], line: (file: string) => string, checkTakesFlag?: false]> = [
  [
    "session-jsonl's dir: 5 under --session-dir",
    '- id: session-jsonl\n  name: "@dsh/session-jsonl"\n  config: { dir: 5 }\n',
    () => ['--session-dir', join(dir, 'sessions')],
    (file) => `dsh: config ${file}: plugin "session-jsonl" (@dsh/session-jsonl): invalid config: - $.dir expected string but got 5 (at dir)`,
  ],
  [
    "llm's model: 5 under --model",
    '- id: llm\n  name: "@dsh/llm"\n  config: { model: 5 }\n',
    () => ['--model', 'scripted:examples/hello.yml'],
    (file) => `dsh: config ${file}: plugin "llm" (@dsh/llm): invalid config: - $.model expected string but got 5 (at model)`,
  ],
  [
    "llm-replay's record: [] under --record",
    '- id: llm-replay\n  name: "@dsh/llm-replay"\n  config: { record: [] }\n',
    () => ['--record', join(dir, 'recording')],
    (file) => `dsh: config ${file}: plugin "llm-replay" (@dsh/llm-replay): invalid config: - $.record expected string but got `,
    false,
  ],
]

describe('a config file with a bad value a flag overrides', () => {
  it.each(cases)('%s: config check, config check with the flag and run with it refuse it in one line, exit 2, nothing stored', async (_what, entry, flags, line, checkTakesFlag) => {
    const file = join(dir, 'dsh.yml')
    writeFileSync(file, entry)
    const model = ['--model', 'scripted:examples/hello.yml']
    const runs = [
      ['config', 'check', '--config', file],
      ...(checkTakesFlag === false ? [] : [['config', 'check', '--config', file, ...flags()]]),
      ['run', '--config', file, ...model, '--session-dir', join(dir, 'sessions'), ...flags(), 'hello'],
    ]
    const results = await Promise.all(runs.map((args) => runDsh(args)))
    for (const [index, result] of results.entries()) {
      expect(result.code, `${runs[index]!.join(' ')}: ${result.stderr}`).toBe(2)
      const lines = result.stderr.trim().split('\n')
      expect(lines).toHaveLength(1)
      expect(lines[0]!.startsWith(line(file)), lines[0]).toBe(true)
    }
    // The same line, flag or none.
    expect(new Set(results.map((result) => result.stderr)).size).toBe(1)
    const sessions = join(dir, 'sessions')
    expect(existsSync(sessions) ? readdirSync(sessions).filter((name) => name.endsWith('.jsonl')) : []).toEqual([])
    expect(existsSync(join(dir, 'recording')) ? readdirSync(join(dir, 'recording')) : []).toEqual([])
  })

  it('a good file still runs with the flag over it, and a disabled entry is not checked', async () => {
    const file = join(dir, 'dsh.yml')
    writeFileSync(file, '- id: session-jsonl\n  name: "@dsh/session-jsonl"\n  config: { dir: elsewhere }\n- id: llm-openai\n  name: "@dsh/llm-openai"\n  disabled: true\n  config: { baseURL: 5 }\n')
    const result = await runDsh(['run', '--config', file, '--model', 'scripted:examples/hello.yml', '--session-dir', join(dir, 'sessions'), 'hello'])
    expect(result.code, result.stderr).toBe(0)
    expect(readdirSync(join(dir, 'sessions')).filter((name) => name.endsWith('.jsonl'))).toHaveLength(1)
    expect(existsSync(join(dir, 'elsewhere'))).toBe(false)
  })
})
