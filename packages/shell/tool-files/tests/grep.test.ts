/**
 * grep through ripgrep and through the built-in search in a worker thread, on the same real
 * files: the same results in the same format and order from both, bounded; a pattern that
 * backtracks for ever stopped by the time bound; bad patterns and paths refused in one line.
 * ripgrep must be installed (npm test's preflight installs it): these tests fail, never
 * skip, without it.
 */
import { join } from 'node:path'
import { afterEach, beforeAll, describe, expect, it } from 'vitest'
import { ripgrepOnPath } from '@dsh/tool-files'
import { call, cleanUp, files, runCalls, tempDir } from './files-harness.js'

afterEach(cleanUp)

beforeAll(() => {
  expect(ripgrepOnPath(), 'these tests compare ripgrep with the built-in search: npm test\'s preflight (scripts/preflight.mjs) installs ripgrep').toBeDefined()
})

const ENGINES = [
  { engine: 'ripgrep', config: { ripgrep: true } },
  { engine: 'the built-in search', config: { ripgrep: false } },
] as const

async function fixture(): Promise<string> {
  const dir = await tempDir()
  await files(dir, {
    'src/app.ts': 'import x from "y"\n// TODO: one\nconst a = 1\nconst b = 2\nconst c = 3\nconst d = 4\n// todo: two\n',
    'src/util.js': 'export const TODO = 3\n',
    'docs/readme.md': 'nothing here\nTODO docs\n',
    'node_modules/dep/index.js': 'TODO in a dependency\n',
    '.git/HEAD': 'TODO in git\n',
    'image.bin': Buffer.from('TODO\0binary'),
  })
  return dir
}

describe.each(ENGINES)('grep with $engine', ({ config }) => {
  it('lists files with matches by default, in path order, skipping .git, node_modules and binary files', async () => {
    const dir = await fixture()
    expect(await call(dir, 'grep', { pattern: 'TODO' }, { config })).toEqual({ text: 'docs/readme.md\nsrc/app.ts\nsrc/util.js', isError: false })
  })

  it('shows lines with their numbers and context, counts, ignores case, and filters by glob, type and path', async () => {
    const dir = await fixture()
    const { results } = await runCalls(
      dir,
      [
        { tool: 'grep', args: { pattern: 'TODO', output_mode: 'content', path: 'src' } },
        { tool: 'grep', args: { pattern: 'todo', '-i': true, output_mode: 'count' } },
        { tool: 'grep', args: { pattern: 'import|const d', output_mode: 'content', '-C': 1, glob: '*.ts' } },
        { tool: 'grep', args: { pattern: 'TODO', type: 'js' } },
        { tool: 'grep', args: { pattern: 'todo', path: 'src/app.ts', output_mode: 'content', '-A': 1 } },
        { tool: 'grep', args: { pattern: 'nowhere to be found' } },
      ],
      { config },
    )
    expect(results).toEqual([
      { text: 'src/app.ts:2:// TODO: one\nsrc/util.js:1:export const TODO = 3', isError: false },
      { text: 'docs/readme.md:1\nsrc/app.ts:2\nsrc/util.js:1', isError: false },
      { text: 'src/app.ts:1:import x from "y"\nsrc/app.ts-2-// TODO: one\n--\nsrc/app.ts-5-const c = 3\nsrc/app.ts:6:const d = 4\nsrc/app.ts-7-// todo: two', isError: false },
      { text: 'src/util.js', isError: false },
      { text: 'src/app.ts:7:// todo: two', isError: false },
      { text: 'no matches for "nowhere to be found" under .', isError: false },
    ])
  })

  it('bounds its output and says it was cut', async () => {
    const dir = await tempDir()
    await files(dir, { 'many.txt': Array.from({ length: 2000 }, (_, i) => `match ${i}`).join('\n') })
    const result = await call(dir, 'grep', { pattern: 'match', output_mode: 'content' }, { config: { ...config, maxOutputChars: 500 } })
    expect(result.isError).toBe(false)
    expect(result.text.length).toBeLessThan(800)
    expect(result.text).toMatch(/^many\.txt:1:match 0\n/)
    expect(result.text).toMatch(/\(output cut at 500 characters; narrow the pattern, the path or the glob, or use output_mode files_with_matches\)$/)
  })

  it('refuses a pattern that is not a regular expression and a path outside the cwd, and the run goes on', async () => {
    const dir = await fixture()
    const { results } = await runCalls(
      dir,
      [
        { tool: 'grep', args: { pattern: 'broken(' } },
        { tool: 'grep', args: { pattern: 'root', path: '/etc' } },
        { tool: 'grep', args: { pattern: 'TODO', glob: '*.md' } },
      ],
      { config },
    )
    expect(results[0]!.isError).toBe(true)
    expect(results[0]!.text).toMatch(/^grep: (ripgrep refused the search: .*regex parse error|the regular expression "broken\(" is not valid)/)
    expect(results[1]!.text).toMatch(/^grep: \/etc is outside the working directory/)
    expect(results[2]).toEqual({ text: 'docs/readme.md', isError: false })
  })
})

describe('the built-in search', () => {
  it('stops a regular expression that backtracks for ever at its time bound, and the run goes on', async () => {
    const dir = await tempDir()
    // (a+)+$ against 40 a's and a b tries every way to split the a's: 2^40 steps.
    await files(dir, { 'evil.txt': `${'a'.repeat(40)}b\n`, 'fine.txt': 'fine\n' })
    const { results } = await runCalls(
      dir,
      [
        { tool: 'grep', args: { pattern: '(a+)+$' } },
        { tool: 'grep', args: { pattern: 'fine' } },
      ],
      { config: { ripgrep: false, grepTimeoutMs: 500 } },
    )
    expect(results[0]).toEqual({
      text: 'grep: the search was stopped after 500ms: the regular expression "(a+)+$" took too long (nested repetition such as (a+)+ can take exponential time on some lines); simplify it or search a narrower path',
      isError: true,
    })
    expect(results[1]).toEqual({ text: 'fine.txt', isError: false })
  })

  it('refuses a type it does not know, naming those it does', async () => {
    const dir = await fixture()
    const result = await call(dir, 'grep', { pattern: 'x', type: 'cobol' }, { config: { ripgrep: false } })
    expect(result.isError).toBe(true)
    expect(result.text).toMatch(/^grep: type cobol is not one this search knows \(c, cpp, .*\); use glob instead$/)
  })

  it('a walk past its bound stops and says so', async () => {
    const dir = await tempDir()
    await files(dir, Object.fromEntries(Array.from({ length: 60 }, (_, i) => [join('gen', `f${String(i).padStart(2, '0')}.txt`), 'hit\n'])))
    const result = await call(dir, 'grep', { pattern: 'hit' }, { config: { ripgrep: false, maxWalkEntries: 20 } })
    expect(result.text.split('\n').filter((line) => line.startsWith('gen/'))).toHaveLength(19)
    expect(result.text).toContain('(the search stopped after 20 entries, so there may be more; narrow the path)')
  })
})
