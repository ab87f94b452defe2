/**
 * A helper's MCP servers through the queue, against a real Redis and a real MCP server (the
 * MCP client's fixture, a process on the SDK's server classes) configured on the worker
 * only: the job carries the server's name, the worker resolves it from its own config, and
 * the child calls the tool; a name the worker lacks fails the job naming it; a deny pattern
 * the parent sent unexpanded is read against the worker's tools.
 */
import { mkdtempSync, rmSync } from 'node:fs'
import { tmpdir } from 'node:os'
import { join } from 'node:path'
import { afterAll, beforeAll, describe, expect, it } from 'vitest'
import { Job, Queue } from 'bullmq'
import { text, textOf } from '@dsh/llm'
import McpPlugin from '@dsh/mcp'
import type { SubagentRequest } from '@dsh/subagent'
import type { AgentDefinition } from '@dsh/agent-definitions'
import { helperRequest } from '@dsh/tool-subagent'
import { MCP_JOB_VERSION, QueuePlugin } from '@dsh/subagent-queue'
import { createDelegationHarness, type DelegationHarness } from '@dsh/testkit/delegation'
import { startRedis, type RedisServer } from '@dsh/testkit/redis'
import { serveQueue, WORKER_NAME, type QueueWorker } from '@dsh/queue-worker'

const QUEUE = 'mcp-helpers'
const FIXTURE = join(import.meta.dirname, '../../../mcp/mcp/tests/fixtures/server.mjs')
let redis: RedisServer
let scratch: string
let worker: DelegationHarness
let served: QueueWorker
let parent: DelegationHarness
let queue: Queue

beforeAll(async () => {
  redis = await startRedis()
  process.env.DSH_TEST_QUEUE_URL = redis.url
  scratch = mkdtempSync(join(tmpdir(), 'dsh-queue-mcp-'))
  worker = await createDelegationHarness({
    script: [
      { when: { prompt: '^echo' }, reply: [{ call: { tool: 'mcp__srv__echo', args: { text: 'through the worker' } } }, { text: 'child: {{last_tool_result}}' }] },
      { reply: [{ text: 'no tool' }] },
    ],
    plugins: [[McpPlugin, { servers: { srv: { command: process.execPath, args: [FIXTURE], readOnlyHints: true } } }]],
  })
  worker.ctx.tools.register({ name: 'read', description: 'the read tool', parameters: { type: 'object' }, execute: () => 'read' })
  served = await serveQueue(worker.ctx, { queues: [QUEUE], redisUrl: redis.url, concurrency: 2, maxDepth: 3, cwd: scratch, lockMs: 2_000 })
  // The parent has no MCP server at all: what the child gets is the worker's.
  parent = await createDelegationHarness({ script: [{ reply: [{ text: 'unused' }] }], sessionDir: false, plugins: [[QueuePlugin, { queue: QUEUE, redisUrlEnv: 'DSH_TEST_QUEUE_URL' }]] })
  queue = new Queue(QUEUE, { connection: { path: redis.socket } })
}, 30_000)

afterAll(async () => {
  await queue?.close()
  await parent?.dispose()
  await served?.close({ cancel: true })
  await worker?.dispose()
  await redis?.stop()
  rmSync(scratch, { recursive: true, force: true })
})

async function delegate(prompt: string, more: Partial<SubagentRequest> = {}) {
  const from = await parent.agent()
  const run = await parent.ctx.subagents.start('queue', { prompt: [text(prompt)], parent: from, signal: new AbortController().signal, ...more })
  const result = await run.result
  await run.dispose()
  const job = await Job.fromId(queue, run.id.replace(/^queue:/, ''))
  return { result, job: job! }
}

const toolsOf = (prompt: string) => worker.requests.find((request) => JSON.stringify(request.messages.at(0)?.content).includes(prompt))!.tools.map((tool) => tool.name)

describe("a helper's MCP servers through the queue", () => {
  it("the job names the server; the worker runs it from its own config and the child's answer comes back", async () => {
    const { result, job } = await delegate('echo it', { helper: { name: 'docs', hash: 'ab12' }, mcpServers: ['srv'] })
    expect(result.stopReason, result.diagnostic).toBe('completed')
    expect(textOf(result.output)).toBe('child: echo: through the worker')
    expect(job.data.v).toBe(MCP_JOB_VERSION)
    expect(job.data.helper).toEqual({ name: 'docs', hash: 'ab12', mcpServers: ['srv'] })
    expect(toolsOf('echo it')).toContain('mcp__srv__echo')
  })

  it('a server the worker does not have fails the job at once, naming it and the servers the worker has; nothing runs', async () => {
    const before = worker.requests.length
    const { result, job } = await delegate('echo elsewhere', { helper: { name: 'docs', hash: 'ab12' }, mcpServers: ['srv', 'github'] })
    expect(result.stopReason).toBe('error')
    expect(result.diagnostic).toContain(`[${WORKER_NAME}] helper "docs" names MCP server "github", which this worker does not have (its servers: srv); add it to the servers of the @dsh/mcp entry of the worker's config`)
    expect(job.attemptsMade).toBe(1)
    expect(worker.requests.length).toBe(before)
  })

  it("a deny pattern the parent sent unexpanded (it has no such server) hides the worker's tools of that server", async () => {
    const { result, job } = await delegate('list without the server', { toolFilter: { deny: ['mcp__srv__*'] } })
    expect(result.stopReason, result.diagnostic).toBe('completed')
    expect(job.data.helper).toEqual({ tools: { deny: ['mcp__srv__*'] } })
    // The worker's other tools stay (read, and the delegation tools its harness has).
    const tools = toolsOf('list without the server')
    expect(tools).toContain('read')
    expect(tools.filter((name) => name.startsWith('mcp__srv__'))).toEqual([])
    expect(toolsOf('echo it')).toContain('read')
  })

  it("a helper definition's request (tool-subagent's helperRequest) sends its servers' names and its disallowedTools pattern unexpanded, though the parent has no such server", async () => {
    const definition: AgentDefinition = {
      name: 'docs',
      description: 'Reads docs.',
      provider: 'queue',
      background: 'allowed',
      continuable: false,
      instructions: '',
      disallowedTools: ['mcp__srv__no*'],
      mcpServers: ['srv'],
      source: { file: '/home/u/.dsh/agents/docs.md', origin: 'user', flavour: 'dsh', hash: 'ab12', lines: {} },
    }
    const from = await parent.agent()
    const request = helperRequest(parent.ctx, definition, parent.ctx.subagents.getProvider('queue')!, { prompt: 'echo by definition', label: 'docs', parent: from, signal: new AbortController().signal }, {})
    const run = await parent.ctx.subagents.start('queue', request)
    const result = await run.result
    await run.dispose()
    const job = (await Job.fromId(queue, run.id.replace(/^queue:/, '')))!
    expect(result.stopReason, result.diagnostic).toBe('completed')
    expect(textOf(result.output)).toBe('child: echo: through the worker')
    expect(job.data.helper).toMatchObject({ name: 'docs', tools: { deny: ['mcp__srv__no*'] }, mcpServers: ['srv'] })
    const tools = toolsOf('echo by definition')
    expect(tools).toContain('mcp__srv__echo')
    expect(tools).not.toContain('mcp__srv__note')
  })
})
