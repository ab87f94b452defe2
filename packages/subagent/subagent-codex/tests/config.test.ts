import { describe, expect, it } from 'vitest'
import { setTraceContextSource, SubagentService } from '@dsh/subagent'
import { createHarness } from '@dsh/testkit/harness'
import { text } from '@dsh/llm'
import type { Agent } from '@dsh/agent'
import { answerServerRequest } from '../src/approvals.js'
import { CodexConfig, CodexPlugin, resolveRunSpec } from '../src/index.js'

const parent = { id: 'parent-1', session: { header: { cwd: '/work/parent' } } } as unknown as Agent
const command = { command: '/bin/codex', args: [], version: 'test' }
const request = (model?: string) => ({ prompt: [text('x')], parent, signal: new AbortController().signal, ...(model && { agentOptions: { model } }) })

describe('codex provider config', () => {
  it('fills the documented defaults', () => {
    expect(CodexConfig({})).toEqual({ providerName: 'codex', env: {}, passEnv: [], permissionMode: 'decline', startupTimeoutMs: 30_000, graceMs: 2_000 })
  })

  it.each([
    [{ permissionMode: 'allow' }, 'permissionMode'],
    [{ timeoutMs: -1 }, 'timeoutMs'],
    [{ env: { CODEX_HOME: 1 } }, 'env'],
    [{ passEnv: 'OPENAI_API_KEY' }, 'passEnv'],
    [{ env: { 'CODEX_HOME=/tmp': 'x' } }, 'env'],
    [{ passEnv: [''] }, 'passEnv'],
    [{ model: '' }, 'model'],
  ])('rejects %j naming the key', (bad, key) => {
    expect(() => CodexConfig(bad as never)).toThrow(key)
  })

  it('rejects a relative cwd at load, naming the key', async () => {
    const harness = await createHarness()
    try {
      await harness.plugin(SubagentService)
      const error = await harness.plugin(CodexPlugin, { cwd: 'relative/dir' }).then(() => undefined, (caught: unknown) => caught)
      expect(error).toMatchObject({ name: 'SubagentError', code: 'INVALID_CONFIG', message: expect.stringContaining('config.cwd must be an absolute path (got "relative/dir")') })
      expect(harness.ctx.subagents.list()).toEqual([])
    } finally {
      await harness.dispose()
    }
  })

  it('resolves a run: parent cwd, decline → untrusted + read-only, request model over config model', () => {
    const spec = resolveRunSpec(CodexConfig({ model: 'gpt-5.5' }), request(), command, {})
    expect(spec).toMatchObject({ cwd: '/work/parent', approvalPolicy: 'untrusted', sandbox: 'read-only', model: 'gpt-5.5', timeoutMs: undefined })
    expect(resolveRunSpec(CodexConfig({ cwd: '/elsewhere', permissionMode: 'accept' }), request('o3'), command, {})).toMatchObject({
      cwd: '/elsewhere',
      approvalPolicy: 'on-request',
      sandbox: 'workspace-write',
      model: 'o3',
    })
  })

  it('passEnv lets named credential-shaped variables through, by exact name', () => {
    const spec = resolveRunSpec(CodexConfig({ passEnv: ['OPENAI_API_KEY'] }), request(), command, { OPENAI_API_KEY: 'k', OPENAI_API_KEY_2: 'k2', PATH: '/bin' })
    expect(spec.env).toEqual({ OPENAI_API_KEY: 'k', PATH: '/bin' })
  })
})

describe('codex provider tracing', () => {
  it('a traced delegation hands Codex TRACEPARENT/TRACESTATE of the delegating call, and the OTEL_* configuration; untraced, neither TRACE variable', () => {
    const parentEnv = { PATH: '/bin', OTEL_EXPORTER_OTLP_ENDPOINT: 'http://127.0.0.1:4318', TRACEPARENT: 'inherited-is-never-passed' }
    expect(resolveRunSpec(CodexConfig({}), { ...request(), callId: 'call_1' }, command, parentEnv).env).toEqual({ PATH: '/bin', OTEL_EXPORTER_OTLP_ENDPOINT: 'http://127.0.0.1:4318' })
    const traceparent = '00-4bf92f3577b34da6a3ce929d0e0e4736-00f067aa0ba902b7-01'
    const remove = setTraceContextSource((parentSession, toolCallId) => (parentSession === 'parent-1' && toolCallId === 'call_1' ? { traceparent, tracestate: 'k=v' } : undefined))
    try {
      expect(resolveRunSpec(CodexConfig({}), { ...request(), callId: 'call_1' }, command, parentEnv).env).toEqual({ PATH: '/bin', OTEL_EXPORTER_OTLP_ENDPOINT: 'http://127.0.0.1:4318', TRACEPARENT: traceparent, TRACESTATE: 'k=v' })
    } finally {
      remove()
    }
  })
})

describe('server request answers', () => {
  it('declines every approval by default and notes it', () => {
    expect(answerServerRequest('item/commandExecution/requestApproval', { command: 'rm -rf /' }, 'decline')).toEqual({ kind: 'result', result: { decision: 'decline' }, note: 'declined command "rm -rf /"' })
    expect(answerServerRequest('item/fileChange/requestApproval', { reason: 'write a.ts' }, 'decline')).toEqual({ kind: 'result', result: { decision: 'decline' }, note: 'declined file change (write a.ts)' })
    expect(answerServerRequest('item/permissions/requestApproval', { permissions: { network: { enabled: true }, fileSystem: null } }, 'decline')).toMatchObject({ result: { permissions: {}, scope: 'turn' } })
    expect(answerServerRequest('execCommandApproval', { command: ['ls', '-la'] }, 'decline')).toMatchObject({ result: { decision: { denied: { rejection: expect.any(String) } } }, note: 'declined command "ls -la"' })
    expect(answerServerRequest('applyPatchApproval', {}, 'decline')).toMatchObject({ result: { decision: { denied: expect.anything() } } })
  })

  it('accepts every approval in accept mode, without a note', () => {
    expect(answerServerRequest('item/commandExecution/requestApproval', { command: 'ls' }, 'accept')).toEqual({ kind: 'result', result: { decision: 'accept' } })
    expect(answerServerRequest('item/permissions/requestApproval', { permissions: { network: { enabled: true }, fileSystem: null } }, 'accept')).toMatchObject({ result: { permissions: { network: { enabled: true } }, scope: 'turn' } })
    expect(answerServerRequest('applyPatchApproval', {}, 'accept')).toMatchObject({ result: { decision: 'approved' } })
  })

  it('declines MCP elicitations in both modes and refuses what it cannot answer', () => {
    expect(answerServerRequest('mcpServer/elicitation/request', { serverName: 'db' }, 'accept')).toMatchObject({ result: { action: 'decline' } })
    expect(answerServerRequest('item/tool/requestUserInput', {}, 'accept')).toMatchObject({ kind: 'error', code: -32000 })
    expect(answerServerRequest('no/such/method', {}, 'accept')).toMatchObject({ kind: 'error', code: -32601 })
  })
})
