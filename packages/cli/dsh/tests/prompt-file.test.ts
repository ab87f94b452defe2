import { readdirSync, readFileSync, writeFileSync } from 'node:fs'
import { join } from 'node:path'
import { describe, expect, it } from 'vitest'
import { runDsh, tempDir } from './cli.js'

/** The user messages stored in the single session file of `dir`. */
function storedPrompts(dir: string): string[] {
  const [file] = readdirSync(dir).filter((name) => name.endsWith('.jsonl'))
  return readFileSync(join(dir, file), 'utf8')
    .trim()
    .split('\n')
    .map((line) => JSON.parse(line) as { type?: string; message?: { content: { text: string }[] } })
    .filter((line) => line.type === 'user/message')
    .map((line) => line.message!.content.map((block) => block.text).join(''))
}

describe('dsh run --prompt-file', () => {
  it('a 10 MB prompt on standard input reaches the model whole and is stored whole', async () => {
    const dir = tempDir()
    const prompt = `hello ${'é'.repeat(5 * 1024 * 1024)}`
    const result = await runDsh(['run', '--model', 'scripted:examples/hello.yml', '--session-dir', dir, '--quiet', '--prompt-file', '-'], { input: prompt, timeoutMs: 120_000 })
    expect(result.stderr).toBe('')
    expect(result.code).toBe(0)
    expect(result.stdout).toContain('Hello! I am dsh')
    expect(storedPrompts(dir)).toEqual([prompt])
  })

  it('reads the prompt from a file', async () => {
    const dir = tempDir()
    const file = join(dir, 'prompt.txt')
    writeFileSync(file, 'say hello\nacross two lines\n')
    const result = await runDsh(['run', '--model', 'scripted:examples/hello.yml', '--session-dir', dir, '--quiet', '--prompt-file', file])
    expect(result.code).toBe(0)
    expect(result.stdout).toContain('Hello! I am dsh')
    expect(storedPrompts(dir)).toEqual(['say hello\nacross two lines\n'])
  })

  it('a missing prompt file is one line naming it, exit 2', async () => {
    const missing = join(tempDir(), 'nope.txt')
    const result = await runDsh(['run', '--model', 'scripted:examples/hello.yml', '--prompt-file', missing])
    expect(result.code).toBe(2)
    expect(result.stderr.trim().split('\n')).toHaveLength(1)
    expect(result.stderr).toContain(`cannot read --prompt-file ${missing}`)
  })

  it('an empty standard input and a prompt given twice are usage errors', async () => {
    const empty = await runDsh(['run', '--model', 'scripted:examples/hello.yml', '--prompt-file', '-'], { input: '  \n' })
    expect(empty.code).toBe(2)
    expect(empty.stderr.trim()).toBe('dsh run: the prompt in standard input is empty')
    const both = await runDsh(['run', '--model', 'scripted:examples/hello.yml', '--prompt-file', '-', 'hello'], { input: 'hello' })
    expect(both.code).toBe(2)
    expect(both.stderr.trim()).toBe('dsh run: give the prompt either as arguments or with --prompt-file, not both')
  })
})
