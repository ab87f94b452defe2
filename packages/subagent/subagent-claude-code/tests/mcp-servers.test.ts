/**
 * A helper's MCP servers reach a Claude Code child (the real binary, on the fake Messages
 * server): the request names them, the parent's MCP client resolves each (`ctx.mcpServers`
 * of `@dsh/mcp`, here with the MCP client's fixture server), Claude Code gets them in the
 * Agent SDK's `mcpServers` option, and the child calls a tool of one. A name the parent
 * does not run refuses the delegation before Claude Code starts.
 */
import { readdirSync, readFileSync } from 'node:fs'
import { join } from 'node:path'
import { afterEach, describe, expect, it } from 'vitest'
import McpPlugin from '@dsh/mcp'
import { text } from '@dsh/llm'
import { setup, type Fixture } from './fixture.js'

const FIXTURE = join(import.meta.dirname, '../../../mcp/mcp/tests/fixtures/server.mjs')
const SECRET = 'mcp-secret-7f3a'
let fixture: Fixture | undefined

/** The pids of the processes whose command line holds `needle` (any user of the machine can read a command line). */
function commandLinesHolding(needle: string): number[] {
  return readdirSync('/proc')
    .filter((name) => /^\d+$/.test(name))
    .filter((pid) => {
      try {
        return readFileSync(`/proc/${pid}/cmdline`, 'utf8').includes(needle)
      } catch {
        return false
      }
    })
    .map(Number)
}

afterEach(async () => {
  await fixture?.dispose()
  fixture = undefined
})

async function open(permissionMode: 'bypassPermissions' | 'ask' = 'bypassPermissions'): Promise<Fixture> {
  fixture = await setup([], { permissionMode })
  await fixture.harness.plugin(McpPlugin, { servers: { srv: { command: process.execPath, args: [FIXTURE], env: { SRV_TOKEN: SECRET } } } })
  return fixture
}

type Block = { type: string; name?: string; content?: unknown; text?: string }
type Body = { messages: { content: string | Block[] }[] }

describe("a helper's MCP servers on a Claude Code child", () => {
  it("Claude Code gets the named server in the SDK's mcpServers (its env never on a command line) and the child's call of one of its tools reaches it", async () => {
    const { fake, start } = await open()
    let leaked: number[] | undefined
    fake.enqueue(
      () => {
        // Claude Code and its server run now: no command line shows the server's variables.
        leaked = commandLinesHolding(SECRET)
        return { toolUses: [{ name: 'mcp__srv__echo', input: { text: 'through claude code' } }] }
      },
      { text: 'Done.' },
    )
    const run = await start('Use the server.', { helper: { name: 'docs', hash: 'ab12' }, mcpServers: ['srv'] })
    const result = await run.result
    await run.dispose()
    expect(result.stopReason, result.diagnostic).toBe('completed')
    expect(leaked).toEqual([])
    const followUp = fake.messageRequests[1]!.body as Body
    const results = followUp.messages.flatMap((message) => (Array.isArray(message.content) ? message.content : [])).filter((block) => block.type === 'tool_result')
    expect(JSON.stringify(results)).toContain('echo: through claude code')
  })

  it('a server name the parent does not run refuses the delegation, naming it and what to configure', async () => {
    const { fake, start } = await open()
    await expect(start('Use the server.', { helper: { name: 'docs', hash: 'ab12' }, mcpServers: ['github'] }).then((run) => run.result)).rejects.toThrow(
      'helper "docs" (Claude Code) names MCP server "github", which this process does not run; add it to the servers of the @dsh/mcp entry of your config',
    )
    expect(fake.messageRequests).toHaveLength(0)
  })
})
