/**
 * The fake model servers are for `dsh demo` only: `dsh run` and `dsh acp` never load
 * `@dsh/testkit`. A module-resolution hook records every module the process loads.
 */
import { readFileSync, writeFileSync } from 'node:fs'
import { join } from 'node:path'
import { pathToFileURL } from 'node:url'
import { describe, expect, it } from 'vitest'
import { runDsh, tempDir } from './cli.js'

function loadRecorder(): { env: NodeJS.ProcessEnv; loaded(): string[] } {
  const dir = tempDir('dsh-loads-')
  const log = join(dir, 'loaded.txt')
  writeFileSync(log, '')
  writeFileSync(join(dir, 'hooks.mjs'), [
    "import { appendFileSync } from 'node:fs'",
    'export async function resolve(specifier, context, next) {',
    '  const result = await next(specifier, context)',
    `  appendFileSync(${JSON.stringify(log)}, result.url + '\\n')`,
    '  return result',
    '}',
  ].join('\n'))
  writeFileSync(join(dir, 'register.mjs'), `import { register } from 'node:module'\nregister(${JSON.stringify(pathToFileURL(join(dir, 'hooks.mjs')).href)})\n`)
  return {
    env: { NODE_OPTIONS: `--import=${pathToFileURL(join(dir, 'register.mjs')).href}` },
    loaded: () => readFileSync(log, 'utf8').split('\n').filter(Boolean),
  }
}

describe('@dsh/testkit at run time', () => {
  it('dsh run loads the runtime but not @dsh/testkit', async () => {
    const recorder = loadRecorder()
    const result = await runDsh(['run', '--model', 'scripted:examples/hello.yml', '--session-dir', tempDir(), '--quiet', 'hello'], { env: recorder.env })
    expect(result.code, result.stderr).toBe(0)
    const loaded = recorder.loaded()
    // The recorder works: it saw the CLI's own modules.
    expect(loaded.some((url) => url.includes('/cli/dsh/dist/run.js'))).toBe(true)
    expect(loaded.filter((url) => url.includes('/testkit/'))).toEqual([])
  })

  it('dsh acp loads the runtime but not @dsh/testkit', async () => {
    const recorder = loadRecorder()
    // stdin is closed at once: the server starts, sees EOF and exits 0.
    const result = await runDsh(['acp', '--model', 'scripted:examples/hello.yml', '--session-dir', tempDir()], { env: recorder.env })
    expect(result.code, result.stderr).toBe(0)
    const loaded = recorder.loaded()
    expect(loaded.some((url) => url.includes('/acp-server/dist/'))).toBe(true)
    expect(loaded.filter((url) => url.includes('/testkit/'))).toEqual([])
  })
})
