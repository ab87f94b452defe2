/**
 * A helper's MCP servers reach a Codex child (the real, pinned `codex app-server`, on the
 * fake Responses server): the request names them, the parent's MCP client resolves each
 * (`ctx.mcpServers` of `@dsh/mcp`, here with the MCP client's fixture server), and Codex
 * starts them from `thread/start`'s config overrides, so the model is offered their tools
 * (as a deferred namespace: the fake Responses server cannot answer with Codex's tool_search).
 * A name the parent does not run refuses the delegation before Codex starts.
 */
import { mkdtempSync } from 'node:fs'
import { tmpdir } from 'node:os'
import { join } from 'node:path'
import { afterEach, describe, expect, it } from 'vitest'
import { text } from '@dsh/llm'
import McpPlugin from '@dsh/mcp'
import { SubagentService, type SubagentRequest, type SubagentRun } from '@dsh/subagent'
import { startFakeOpenAIResponses, type FakeOpenAIResponses, type FakeResponsesAnswer } from '@dsh/testkit'
import { createHarness, type Harness } from '@dsh/testkit/harness'
import { CodexPlugin } from '../src/index.js'
import { appServerPids, codexHome } from './helpers.js'

const FIXTURE = join(import.meta.dirname, '../../../mcp/mcp/tests/fixtures/server.mjs')
let harness: Harness | undefined
let fake: FakeOpenAIResponses | undefined
const runs: SubagentRun[] = []

afterEach(async () => {
  await Promise.all(runs.splice(0).map((run) => run.dispose()))
  await harness?.dispose()
  await fake?.close()
  harness = undefined
  fake = undefined
})

async function start(answers: FakeResponsesAnswer[], extra: Partial<SubagentRequest>): Promise<SubagentRun> {
  fake = await startFakeOpenAIResponses(answers)
  const home = codexHome(fake.url)
  harness = await createHarness()
  await harness.plugin(SubagentService)
  await harness.plugin(McpPlugin, { servers: { srv: { command: process.execPath, args: [FIXTURE] } } })
  await harness.plugin(CodexPlugin, { env: { CODEX_HOME: home, HOME: home, FAKE_CODEX_API_KEY: 'sk-fake' }, graceMs: 500, permissionMode: 'accept' })
  const parent = await harness.agent({ meta: { cwd: mkdtempSync(join(tmpdir(), 'dsh-codex-work-')) } })
  const run = await harness.ctx.subagents.start('codex', { prompt: [text('use the server')], parent, signal: new AbortController().signal, ...extra })
  runs.push(run)
  return run
}

describe("a helper's MCP servers on a Codex child", () => {
  it('Codex starts the named server from its config overrides and offers the model its tools', async () => {
    const run = await start([{ text: 'done' }], { helper: { name: 'docs', hash: 'ab12' }, mcpServers: ['srv'] })
    const result = await run.result
    expect(result.stopReason, result.diagnostic).toBe('completed')
    // Codex 0.171 lists an MCP server's tools as a deferred namespace (found with its tool_search):
    // there only once it started the server and listed its tools.
    expect(JSON.stringify(fake!.requests[0]!.body)).toContain('Deferred tool namespaces:\\n- mcp__srv\\n')
  })

  it('a child without servers is offered none', async () => {
    const run = await start([{ text: 'done' }], {})
    expect((await run.result).stopReason).toBe('completed')
    expect(JSON.stringify(fake!.requests[0]!.body)).not.toContain('mcp__srv')
  })

  it('a server name the parent does not run refuses the delegation, naming it and what to configure; no Codex process starts', async () => {
    await expect(start([{ text: 'never' }], { helper: { name: 'docs', hash: 'ab12' }, mcpServers: ['srv', 'github'] })).rejects.toThrow(
      'helper "docs" (the codex app-server) names MCP server "github", which this process does not run; add it to the servers of the @dsh/mcp entry of your config',
    )
    expect(appServerPids()).toEqual([])
    expect(fake!.requests).toHaveLength(0)
  })
})
