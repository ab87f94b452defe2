import { writeFileSync } from 'node:fs'
import { join } from 'node:path'
import { describe, expect, it } from 'vitest'
import { randomUUID } from 'node:crypto'
import { Role, TaskState, type StreamResponse } from '@a2a-js/sdk'
import { ClientFactory, DefaultAgentCardResolver, JsonRpcTransportFactory } from '@a2a-js/sdk/client'
import { runDsh, tempDir } from './cli.js'
import { serve } from './a2a-serve-process.js'

function sdkClient(url: string, token?: string) {
  const fetchImpl: typeof fetch = token === undefined ? fetch : (input, init) => {
    const headers = new Headers(init?.headers)
    headers.set('Authorization', `Bearer ${token}`)
    return fetch(input, { ...init, headers })
  }
  return new ClientFactory({ transports: [new JsonRpcTransportFactory({ fetchImpl })], cardResolver: new DefaultAgentCardResolver({ fetchImpl }) }).createFromUrl(url)
}

function message(text: string, metadata?: Record<string, unknown>) {
  return {
    tenant: '',
    message: { messageId: randomUUID(), contextId: '', taskId: '', role: Role.ROLE_USER, parts: [{ content: { $case: 'text' as const, value: text }, metadata: undefined, filename: '', mediaType: 'text/plain' }], metadata, extensions: [], referenceTaskIds: [] },
    configuration: undefined,
    metadata: undefined,
  }
}

function lastState(events: StreamResponse[]): TaskState | undefined {
  let state: TaskState | undefined
  for (const { payload } of events) {
    if (payload?.$case === 'task' || payload?.$case === 'statusUpdate') state = payload.value.status?.state ?? state
  }
  return state
}

describe('dsh a2a serve', () => {
  it('the SDK client drives it: tasks complete, and sessions tree lists every session of the remote parent under one heading naming it', async () => {
    const sessions = tempDir()
    const served = await serve(['--model', 'scripted:examples/acp-child.yml', '--session-dir', sessions])
    const client = await sdkClient(served.url)
    for (const label of ['geo', 'geo again']) {
      const events: StreamResponse[] = []
      for await (const event of client.sendMessageStream(message('capital of France?', { dsh: { parentSession: 'remote-parent', delegationDepth: 1, provider: 'a2a', label } }))) events.push(event)
      expect(lastState(events)).toBe(TaskState.TASK_STATE_COMPLETED)
      const answer = events.flatMap(({ payload }) => (payload?.$case === 'artifactUpdate' && payload.value.artifact?.artifactId === 'answer' ? payload.value.artifact.parts : []))
      expect(answer.map((part) => (part.content?.$case === 'text' ? part.content.value : '')).join('')).toBe('Paris is the capital of France.')
    }
    served.child.kill('SIGTERM')
    expect(await served.exited).toBe(0)
    const expected = /^remote-parent {2}\(stored elsewhere; 2 sessions here\)\n├─ \S+ {2}a2a "geo" {2}completed {2}\(depth 1\)\n└─ \S+ {2}a2a "geo again" {2}completed {2}\(depth 1\)\n$/
    const newest = await runDsh(['sessions', 'tree', '--session-dir', sessions])
    expect(newest.code).toBe(0)
    expect(newest.stdout).toMatch(expected)
    const byParent = await runDsh(['sessions', 'tree', 'remote-parent', '--session-dir', sessions])
    expect(byParent.code).toBe(0)
    expect(byParent.stdout).toMatch(expected)
  })

  it('with --token-env, the card is public and names the bearer scheme, a task without the token gets 401 saying so, and the SDK client with it is served', async () => {
    const served = await serve(['--model', 'scripted:examples/acp-child.yml', '--session-dir', tempDir(), '--token-env', 'A2A_TEST_TOKEN'], { A2A_TEST_TOKEN: 'tok-123' })
    const card = await fetch(`${served.url}/.well-known/agent-card.json`)
    expect(card.status).toBe(200)
    expect(JSON.stringify(((await card.json()) as { securitySchemes: unknown }).securitySchemes)).toContain('"scheme":"Bearer"')
    const anonymous = (await sdkClient(served.url)).sendMessageStream(message('capital of France?'))
    await expect(anonymous.next()).rejects.toThrow(/^401 Unauthorized: the request has no Authorization header/)
    const client = await sdkClient(served.url, 'tok-123')
    const events: StreamResponse[] = []
    for await (const event of client.sendMessageStream(message('capital of France?'))) events.push(event)
    expect(lastState(events)).toBe(TaskState.TASK_STATE_COMPLETED)
  })

  it('refuses to listen on a non-loopback address without a token, with exit code 2', async () => {
    const result = await runDsh(['a2a', 'serve', '--host', '0.0.0.0', '--port', '0', '--model', 'scripted:examples/acp-child.yml'])
    expect(result.code).toBe(2)
    expect(result.stderr).toMatch(/refusing to listen on 0\.0\.0\.0 without a token.*--token-env/)
  })

  it('refuses a wildcard address without --public-url, with exit code 2 and one line saying what to pass', async () => {
    const result = await runDsh(['a2a', 'serve', '--host', '0.0.0.0', '--port', '0', '--token-env', 'A2A_TEST_TOKEN', '--model', 'scripted:examples/acp-child.yml'], { env: { A2A_TEST_TOKEN: 'tok' } })
    expect(result.code).toBe(2)
    expect(result.stderr.trim().split('\n')).toHaveLength(1)
    expect(result.stderr).toMatch(/listening on 0\.0\.0\.0 needs a public URL.*--public-url/)
  })

  it('a --token-env naming an unset variable is a usage error', async () => {
    const result = await runDsh(['a2a', 'serve', '--token-env', 'A2A_TEST_UNSET_TOKEN', '--model', 'scripted:examples/acp-child.yml'])
    expect(result.code).toBe(2)
    expect(result.stderr).toMatch(/A2A_TEST_UNSET_TOKEN, which is not set/)
  })
})

describe('the a2a provider in a config file', () => {
  it('an unknown key is rejected at load, naming it', async () => {
    const dir = tempDir()
    const config = join(dir, 'a2a.yml')
    writeFileSync(config, '- id: subagent-a2a\n  name: "@dsh/subagent-a2a"\n  config:\n    urls: [http://127.0.0.1:7700]\n    token: secret\n')
    const result = await runDsh(['config', 'check', '--config', config])
    expect(result.code).toBe(2)
    expect(result.stderr).toMatch(/unknown config key "token" \(allowed there: providerName, urls, tokenEnv, timeoutMs\)/)
  })

  it('a tokenEnv that is not set fails the load with what to do', async () => {
    const dir = tempDir()
    const config = join(dir, 'a2a.yml')
    writeFileSync(config, '- id: subagent-a2a\n  name: "@dsh/subagent-a2a"\n  config:\n    urls: [http://127.0.0.1:7700]\n    tokenEnv: A2A_TEST_UNSET_TOKEN\n')
    const result = await runDsh(['config', 'check', '--config', config])
    expect(result.code).toBe(2)
    expect(result.stderr).toMatch(/A2A_TEST_UNSET_TOKEN, which is not set/)
  })

  it('a parent delegating through the a2a provider reaches a dsh a2a serve worker and gets its answer', async () => {
    const served = await serve(['--model', 'scripted:examples/acp-child.yml', '--session-dir', tempDir()])
    const dir = tempDir()
    const config = join(dir, 'a2a.yml')
    writeFileSync(config, `- id: subagent-a2a\n  name: "@dsh/subagent-a2a"\n  config:\n    urls: [${served.url}]\n- id: tool-subagent-a2a\n  name: "@dsh/tool-subagent"\n  config:\n    provider: a2a\n    toolName: subagent_a2a\n`)
    const parentScript = join(dir, 'parent.yml')
    writeFileSync(parentScript, '- when: { depth: 0 }\n  reply:\n    - call: { tool: subagent_a2a, args: { description: "ask about France", prompt: "What is the capital of France?" } }\n    - text: "The worker answered: {{last_tool_result}}"\n')
    const sessions = tempDir()
    const result = await runDsh(['run', '--config', config, '--model', `scripted:${parentScript}`, '--session-dir', sessions, 'ask the worker'])
    expect(result.stdout).toContain('The worker answered: Paris is the capital of France.')
    expect(result.code).toBe(0)
    // The worker stored its session on its own disk: the parent's tree says where the child lives.
    const tree = await runDsh(['sessions', 'tree', '--session-dir', sessions])
    const lines = tree.stdout.trim().split('\n')
    expect(lines).toHaveLength(2)
    expect(lines[1]).toMatch(new RegExp(`^└─ a2a:\\S+ {2}a2a "ask about France" {2}stored elsewhere: the A2A worker ${served.url.replace(/[.:/]/g, '\\$&')}$`))
  })
})

describe('serving callers elsewhere without the approval broker', () => {
  it('dsh a2a serve and dsh worker refuse to start, naming the missing broker, rather than run side effects nobody decides', async () => {
    const dir = tempDir()
    const config = join(dir, 'no-approvals.yml')
    writeFileSync(config, '- id: approvals\n  name: "@dsh/approvals"\n  disabled: true\n')
    const a2a = await runDsh(['a2a', 'serve', '--config', config, '--model', 'scripted:examples/acp-child.yml', '--session-dir', dir])
    expect(a2a.code).toBe(2)
    expect(a2a.stderr).toMatch(/dsh a2a serve: the composition has no approval broker \(- id: approvals, name: "@dsh\/approvals"\)/)
    const worker = await runDsh(['worker', '--config', config, '--model', 'scripted:examples/acp-child.yml', '--session-dir', dir], { env: { ...process.env, DSH_REDIS_URL: 'redis://127.0.0.1:1' } })
    expect(worker.code).toBe(2)
    expect(worker.stderr).toMatch(/dsh worker: the composition has no approval broker/)
  })
})
