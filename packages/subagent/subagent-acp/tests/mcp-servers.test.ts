/**
 * The MCP servers a delegation names reach its ACP agent in `session/new`, in ACP's shape:
 * resolved by this process's table of configured servers (`ctx.mcpServers` of `@dsh/mcp`,
 * read by shape; here a stand-in with the same `resolve`), stdio always, HTTP only to an
 * agent that advertises `mcpCapabilities.http`, and every server left out one warning that
 * names it and never a value of its entry. The fixture agent answers with what it received.
 */
import { afterEach, describe, expect, it } from 'vitest'
import { textOf } from '@dsh/llm'
import { fixture, setup, type Setup } from './helpers.js'

const SECRET = 'sk-test-not-for-logs-7f3a'

/** What the stand-in table knows: `${NAME}` already read, as `@dsh/mcp`'s `resolve` gives it. */
const TABLE: Record<string, unknown> = {
  files: { name: 'files', config: { command: '/usr/bin/files-server', args: ['/srv/docs'], env: { FILES_TOKEN: SECRET } } },
  github: { name: 'github', config: { type: 'http', url: 'https://mcp.example/', headers: { Authorization: `Bearer ${SECRET}` } } },
  scoped: { name: 'scoped', config: { command: 'scoped-server', cwd: '/srv' } },
}

let current: Setup | undefined
let warnings: string[] = []
afterEach(async () => {
  await current?.harness.dispose()
  current = undefined
  warnings = []
})

async function provider(mode: 'mcp' | 'mcp-http', withTable = true): Promise<Setup> {
  current = await setup({ command: process.execPath, args: [fixture('agent.mjs'), mode] })
  const { ctx } = current.harness
  ctx.logger.exporter({ colors: 0, levels: { default: 2 }, export: (message) => void warnings.push(String(message.args.join(' '))) } as Parameters<typeof ctx.logger.exporter>[0])
  if (withTable) {
    ctx.provide('mcpServers')
    ctx.set('mcpServers', {
      resolve: (name: string) => {
        if (name === 'unset') throw new Error('the mcp entry: servers.unset.env.TOKEN names ${MISSING_TOKEN}, which is not set in dsh\'s environment')
        return TABLE[name]
      },
    })
  }
  return current
}

/** The `mcpServers` the agent received in `session/new` for a delegation naming `names`. */
async function received(setupDone: Setup, names?: string[]): Promise<unknown> {
  const run = await setupDone.harness.ctx.subagents.start('acp', setupDone.request('x', names && { mcpServers: names }))
  const result = await run.result
  await run.dispose()
  return JSON.parse(textOf(result.output))
}

describe("acp: a delegation's MCP servers in session/new", () => {
  it('an agent that takes HTTP servers gets the stdio and the HTTP server in ACP\'s shape; an unknown name and an unreadable entry are one warning each, naming them and no value', async () => {
    const acp = await provider('mcp-http')
    expect(await received(acp, ['files', 'github', 'nowhere', 'unset'])).toEqual([
      { name: 'files', command: '/usr/bin/files-server', args: ['/srv/docs'], env: [{ name: 'FILES_TOKEN', value: SECRET }] },
      { type: 'http', name: 'github', url: 'https://mcp.example/', headers: [{ name: 'Authorization', value: `Bearer ${SECRET}` }] },
    ])
    expect(warnings).toEqual([
      expect.stringContaining('MCP server "nowhere" is not sent to the ACP child: it is not among the servers of this process\'s @dsh/mcp entry'),
      expect.stringContaining('MCP server "unset" is not sent to the ACP child: the mcp entry: servers.unset.env.TOKEN names ${MISSING_TOKEN}'),
    ])
    expect(warnings.join('\n')).not.toContain(SECRET)
  })

  it('an agent that does not advertise mcpCapabilities.http gets the stdio server only, with one warning naming the HTTP one; a server with a cwd is left out, saying what to change', async () => {
    const acp = await provider('mcp')
    expect(await received(acp, ['files', 'github', 'scoped'])).toEqual([{ name: 'files', command: '/usr/bin/files-server', args: ['/srv/docs'], env: [{ name: 'FILES_TOKEN', value: SECRET }] }])
    expect(warnings).toHaveLength(2)
    expect(warnings[0]).toMatch(/MCP server "github" is not sent to the ACP agent \(.*agent\.mjs mcp\): it is an HTTP server and the agent does not advertise mcpCapabilities\.http/)
    expect(warnings[1]).toMatch(/MCP server "scoped" is not sent to the ACP agent .*: ACP's session\/new cannot carry its cwd; give absolute paths in its args and drop cwd/)
    expect(warnings.join('\n')).not.toContain(SECRET)
  })

  it('a delegation that names no server sends the empty list ACP requires; without @dsh/mcp composed a named server is a warning saying so', async () => {
    const acp = await provider('mcp', false)
    expect(await received(acp)).toEqual([])
    expect(await received(acp, ['files'])).toEqual([])
    expect(warnings).toEqual([expect.stringContaining('MCP server "files" is not sent to the ACP child: it is not among the servers of this process\'s @dsh/mcp entry (no @dsh/mcp entry is composed); add it there')])
  })
})
