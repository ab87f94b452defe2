/**
 * A real third-party MCP server from npm, `@modelcontextprotocol/server-filesystem` (an
 * exact-pinned devDependency of this package), started by the MCP client as any user's
 * server is: a dsh agent calls its tools as `mcp__files__<tool>`.
 */
import { existsSync, writeFileSync } from 'node:fs'
import { createRequire } from 'node:module'
import { dirname, join } from 'node:path'
import { afterEach, describe, expect, it } from 'vitest'
import { cleanUp, runAgent, startMcp, tempDir } from './mcp-harness.js'

afterEach(cleanUp)

/** The server's executable, from where npm installed it. */
const SERVER = join(dirname(createRequire(import.meta.url).resolve('@modelcontextprotocol/server-filesystem/package.json')), 'dist', 'index.js')

describe('@modelcontextprotocol/server-filesystem from npm', () => {
  it('a dsh agent lists and reads the directory it was given; a write (a side effect by its annotations) is refused under reject, and the file is not made', async () => {
    const dir = await tempDir()
    writeFileSync(join(dir, 'notes.txt'), 'the answer is 42\n')
    const run = await startMcp(
      { servers: { files: { command: process.execPath, args: [SERVER, dir], readOnlyHints: true } } },
      {
        calls: [
          { tool: 'mcp__files__list_directory', args: { path: dir } },
          { tool: 'mcp__files__read_text_file', args: { path: join(dir, 'notes.txt') } },
          { tool: 'mcp__files__write_file', args: { path: join(dir, 'new.txt'), content: 'written' } },
        ],
        approvals: { default: 'reject' },
      },
    )
    expect(run.harness.ctx.tools.get('mcp__files__read_text_file')!.sideEffecting).toBe(false)
    expect(run.harness.ctx.tools.get('mcp__files__write_file')!.sideEffecting).toBe(true)
    const { results } = await runAgent(run)
    expect(results[0]).toEqual({ text: '[FILE] notes.txt', isError: false })
    expect(results[1]).toEqual({ text: 'the answer is 42\n', isError: false })
    expect(results[2]!.isError).toBe(true)
    expect(results[2]!.text).toMatch(/^mcp__files__write_file was not run/)
    expect(existsSync(join(dir, 'new.txt'))).toBe(false)
  })
})
