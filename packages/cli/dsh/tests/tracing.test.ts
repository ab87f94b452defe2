/**
 * One trace for the whole tree: `dsh run` with the standard OTEL_* variables, delegating to
 * a spawn child, a fork child, a `dsh acp` child that delegates again, and a `dsh a2a
 * serve` worker, every process exporting to one OTLP/HTTP receiver on 127.0.0.1. And a
 * collector that refuses or hangs changes neither the exit nor the output.
 */
import { spawn, type ChildProcess } from 'node:child_process'
import { randomUUID } from 'node:crypto'
import { Role } from '@a2a-js/sdk'
import { ClientFactory, DefaultAgentCardResolver, JsonRpcTransportFactory } from '@a2a-js/sdk/client'
import { readdirSync, readFileSync, writeFileSync } from 'node:fs'
import { join } from 'node:path'
import { afterEach, describe, expect, it } from 'vitest'
import { startRedis } from '@dsh/testkit/redis'
import { decodeOtlpJson, refusingEndpoint, startOtlpReceiver, type OtlpReceiver, type ReceivedSpan } from '@dsh/testkit/otlp'
import { realpathSync } from 'node:fs'
import { methods, PROTOCOL_VERSION } from '@agentclientprotocol/sdk'
import { killRunning, serveDsh } from './acp-client.js'
import { dshBin, repoRoot, runDsh, tempDir } from './cli.js'
import { until } from './processes.js'

const cleanups: (() => Promise<unknown>)[] = []
afterEach(async () => {
  killRunning()
  for (const cleanup of cleanups.splice(0).reverse()) await cleanup()
})

async function receiver(mode: 'accept' | 'hang' = 'accept'): Promise<OtlpReceiver> {
  const started = await startOtlpReceiver({ mode })
  cleanups.push(() => started.close())
  return started
}

/** `dsh a2a serve` as a real process, exporting its spans to `endpoint`; resolves with its URL. */
async function a2aWorker(endpoint: string): Promise<{ url: string; child: ChildProcess; stderr(): string }> {
  const child = spawn(process.execPath, [dshBin, 'a2a', 'serve', '--port', '0', '--model', 'scripted:examples/acp-child.yml', '--session-dir', tempDir()], {
    cwd: repoRoot,
    env: { ...process.env, DSH_HOME: tempDir('dsh-home-'), OTEL_EXPORTER_OTLP_ENDPOINT: endpoint, OTEL_SERVICE_NAME: 'dsh-worker' },
    stdio: ['ignore', 'pipe', 'pipe'],
  })
  let stdout = ''
  let stderr = ''
  child.stdout!.on('data', (chunk: Buffer) => (stdout += chunk))
  child.stderr!.on('data', (chunk: Buffer) => (stderr += chunk))
  const exited = new Promise((resolve) => child.on('close', resolve))
  cleanups.push(async () => {
    if (child.exitCode === null && child.signalCode === null) child.kill('SIGTERM')
    await exited
  })
  await until(
    () => stdout.includes('\n'),
    () => (child.exitCode !== null ? `dsh a2a serve exited ${child.exitCode}: ${stderr}` : undefined),
  )
  return { url: stdout.trim(), child, stderr: () => stderr }
}

/** Send `text` to a worker with the A2A SDK's own client, every HTTP request carrying `headers`; resolves when its stream ends. */
async function sendWithHeaders(url: string, text: string, headers: Record<string, string>): Promise<void> {
  const fetchImpl: typeof fetch = (input, init) => {
    const merged = new Headers(init?.headers)
    for (const [name, value] of Object.entries(headers)) merged.set(name, value)
    return fetch(input, { ...init, headers: merged })
  }
  const client = await new ClientFactory({ transports: [new JsonRpcTransportFactory({ fetchImpl })], cardResolver: new DefaultAgentCardResolver({ fetchImpl }) }).createFromUrl(url)
  const message = { messageId: randomUUID(), contextId: '', taskId: '', role: Role.ROLE_USER, parts: [{ content: { $case: 'text' as const, value: text }, metadata: undefined, filename: '', mediaType: 'text/plain' }], metadata: undefined, extensions: [], referenceTaskIds: [] }
  for await (const _ of client.sendMessageStream({ tenant: '', message, configuration: undefined, metadata: undefined })) void _
}

/** The scripted model of every dsh in the tree, each rule matched by the prompt its agent was given. */
const SCRIPT = [
  '- when: { prompt: "list the risks" }',
  '  reply:',
  '    - text: "risks: the migration has no rollback"',
  '- when: { prompt: "suggest a fix" }',
  '  reply:',
  '    - text: "fix: add a down-migration first"',
  '- when: { prompt: "grandchild task" }',
  '  reply:',
  '    - text: "grandchild done"',
  '- when: { prompt: "ask the acp child" }',
  '  reply:',
  '    - call: { tool: subagent, args: { description: "delegate again", prompt: "grandchild task" } }',
  '    - text: "the ACP child heard: {{last_tool_result}}"',
  '- when: { depth: 0 }',
  '  reply:',
  '    - calls:',
  '        - { tool: subagent, args: { description: "find risks", prompt: "list the risks of the plan" } }',
  '        - { tool: subagent_fork, args: { description: "propose a fix", prompt: "suggest a fix for the top risk" } }',
  '        - { tool: subagent_acp, args: { description: "over acp", prompt: "ask the acp child to delegate" } }',
  '        - { tool: subagent_a2a, args: { description: "over a2a", prompt: "What is the capital of France?" } }',
  '    - text: "All four reported:\\n{{tool_results}}"',
  '',
].join('\n')

function treeConfig(dir: string, script: string, workerUrl: string): string {
  const config = join(dir, 'dsh.yml')
  writeFileSync(
    config,
    [
      '- id: tool-subagent-fork',
      '  name: "@dsh/tool-subagent"',
      '  config: { provider: fork, toolName: subagent_fork }',
      '- id: subagent-acp',
      '  name: "@dsh/subagent-acp"',
      '  config:',
      '    providerName: acp',
      `    cwd: ${repoRoot}`,
      '    command: node',
      `    args: [${dshBin}, acp, --model, "scripted:${script}"]`,
      '    permission: reject',
      '- id: tool-subagent-acp',
      '  name: "@dsh/tool-subagent"',
      '  config: { provider: acp, toolName: subagent_acp }',
      '- id: subagent-a2a',
      '  name: "@dsh/subagent-a2a"',
      `  config: { urls: [${workerUrl}] }`,
      '- id: tool-subagent-a2a',
      '  name: "@dsh/tool-subagent"',
      '  config: { provider: a2a, toolName: subagent_a2a }',
      '',
    ].join('\n'),
  )
  return config
}

const op = (span: ReceivedSpan) => span.attributes['gen_ai.operation.name']
const CONTENT_KEYS = ['gen_ai.input.messages', 'gen_ai.output.messages', 'gen_ai.tool.call.arguments', 'gen_ai.tool.call.result', 'gen_ai.system_instructions']

interface Usage {
  inputTokens: number
  outputTokens: number
}

/** Every recorded answer's usage, per session, from the session files in `dir`. */
function recordedUsage(dir: string): Map<string, Usage[]> {
  const usage = new Map<string, Usage[]>()
  for (const name of readdirSync(dir).filter((file) => file.endsWith('.jsonl'))) {
    const lines = readFileSync(join(dir, name), 'utf8').trim().split('\n').map((line) => JSON.parse(line) as Record<string, unknown>)
    const id = (lines[0]!.header as { id: string }).id
    const answers = lines.flatMap((line) => {
      const event = line as { type?: string; usage?: Usage }
      return event.type === 'assistant/message' && event.usage ? [event.usage] : []
    })
    usage.set(id, answers)
  }
  return usage
}

describe('tracing a tree across processes', () => {
  it('one trace across dsh run, its spawn and fork children, a dsh acp child that delegates again, and an A2A worker, in the GenAI shape, without content', async () => {
    const otlp = await receiver()
    const worker = await a2aWorker(otlp.origin)
    const dir = tempDir()
    const script = join(dir, 'script.yml')
    writeFileSync(script, SCRIPT)
    const sessions = join(dir, 'sessions')
    const result = await runDsh(['run', '--config', treeConfig(dir, script, worker.url), '--model', `scripted:${script}`, '--session-dir', sessions, '--quiet', 'review the plan'], {
      env: { OTEL_EXPORTER_OTLP_ENDPOINT: otlp.origin, OTEL_SERVICE_NAME: 'dsh-under-test' },
      timeoutMs: 60_000,
    })
    expect(result.code, result.stderr).toBe(0)
    expect(result.stdout).toContain('the ACP child heard: grandchild done')
    expect(result.stdout).toContain('Paris is the capital of France.')
    expect(result.stderr).not.toContain('tracing')

    // The root, spawn, fork (this process), the ACP child and its spawn child, the A2A worker's agent.
    const spans = await otlp.waitFor((received) => received.filter((span) => op(span) === 'invoke_agent').length >= 6)
    const agents = spans.filter((span) => op(span) === 'invoke_agent')
    expect(agents).toHaveLength(6)
    expect(new Set(spans.map((span) => span.traceId)).size).toBe(1)
    // Three processes exported: the parent, the ACP child, the worker.
    expect(new Set(spans.map((span) => span.resource['process.pid'])).size).toBe(3)
    // The ACP child was given the parent's OTEL_* (its service name among them); the worker has its own.
    const serviceOf = (pid: unknown) => new Set(spans.filter((span) => span.resource['process.pid'] === pid).map((span) => span.resource['service.name']))
    expect(serviceOf(worker.child.pid)).toEqual(new Set(['dsh-worker']))
    expect(new Set(spans.map((span) => span.resource['service.name']))).toEqual(new Set(['dsh-under-test', 'dsh-worker']))

    const byId = new Map(spans.map((span) => [span.spanId, span]))
    const [root, ...children] = agents.sort((a, b) => Number(a.attributes['dsh.delegation.depth']) - Number(b.attributes['dsh.delegation.depth']))
    expect(root!.parentSpanId).toBeUndefined()
    expect(root!.attributes['gen_ai.agent.name']).toBe('dsh')
    // Every child's turn is under the parent's execute_tool span of the call that delegated to it.
    const delegatedBy = children.map((child) => {
      const call = byId.get(child.parentSpanId ?? '')
      expect(call && op(call), `the parent of ${child.name}`).toBe('execute_tool')
      return { provider: child.attributes['dsh.subagent.provider'], depth: child.attributes['dsh.delegation.depth'], tool: call!.attributes['gen_ai.tool.name'], callerPid: call!.resource['process.pid'], pid: child.resource['process.pid'] }
    })
    const rootPid = root!.resource['process.pid']
    const acpPid = delegatedBy.find((child) => child.provider === 'acp')!.pid
    expect(delegatedBy.sort((a, b) => `${a.depth}${a.tool}`.localeCompare(`${b.depth}${b.tool}`))).toEqual([
      { provider: 'spawn', depth: 1, tool: 'subagent', callerPid: rootPid, pid: rootPid },
      { provider: 'a2a', depth: 1, tool: 'subagent_a2a', callerPid: rootPid, pid: worker.child.pid },
      { provider: 'acp', depth: 1, tool: 'subagent_acp', callerPid: rootPid, pid: acpPid },
      { provider: 'fork', depth: 1, tool: 'subagent_fork', callerPid: rootPid, pid: rootPid },
      // The ACP child's own delegation: its spawn child, under the ACP process's execute_tool.
      { provider: 'spawn', depth: 2, tool: 'subagent', callerPid: acpPid, pid: acpPid },
    ])
    expect(acpPid).not.toBe(rootPid)
    // The tool calls are the turn's: under the invoke_agent span, as the conventions put them.
    for (const call of spans.filter((span) => op(span) === 'execute_tool')) expect(op(byId.get(call.parentSpanId!)!)).toBe('invoke_agent')

    // Each chat span carries the model and the tokens the session recorded for that answer.
    const chats = spans.filter((span) => op(span) === 'chat')
    for (const chat of chats) {
      expect(chat.attributes).toMatchObject({ 'gen_ai.provider.name': 'scripted', 'gen_ai.request.model': expect.any(String), 'gen_ai.response.finish_reasons': [expect.any(String)] })
      expect(chat.name).toBe(`chat ${chat.attributes['gen_ai.request.model']}`)
    }
    const usage = recordedUsage(sessions)
    let compared = 0
    for (const [session, answers] of usage) {
      const turn = agents.find((span) => span.attributes['gen_ai.conversation.id'] === session)
      expect(turn, `the invoke_agent span of session ${session}`).toBeDefined()
      const ofTurn = chats.filter((chat) => chat.parentSpanId === turn!.spanId).sort((a, b) => a.startMs - b.startMs)
      expect(ofTurn.map((chat) => ({ inputTokens: chat.attributes['gen_ai.usage.input_tokens'], outputTokens: chat.attributes['gen_ai.usage.output_tokens'] }))).toEqual(answers.map(({ inputTokens, outputTokens }) => ({ inputTokens, outputTokens })))
      expect(turn!.attributes['gen_ai.usage.input_tokens']).toBe(answers.reduce((sum, answer) => sum + answer.inputTokens, 0))
      compared += answers.length
    }
    // The parent's own sessions and the ACP child's (stored beside them): root 2 answers, spawn, fork, acp 2, grandchild.
    expect(compared).toBe(7)
    expect(chats.every((chat) => Number(chat.attributes['gen_ai.usage.input_tokens']) > 0)).toBe(true)

    // No content by default: no content attribute, and no prompt or answer text anywhere.
    const everything = JSON.stringify(spans)
    for (const key of CONTENT_KEYS) expect(spans.some((span) => key in span.attributes)).toBe(false)
    for (const text of ['list the risks of the plan', 'grandchild done', 'Paris is the capital', 'review the plan']) expect(everything).not.toContain(text)
  })

  it('dsh a2a serve continues a trace given only as a traceparent HTTP header, and starts a new one, unechoed, for a malformed one', async () => {
    const otlp = await receiver()
    const worker = await a2aWorker(otlp.origin)
    await sendWithHeaders(worker.url, 'capital of France?', { traceparent: '00-4bf92f3577b34da6a3ce929d0e0e4736-00f067aa0ba902b7-01' })
    const [given] = (await otlp.waitFor((received) => received.some((span) => op(span) === 'invoke_agent'))).filter((span) => op(span) === 'invoke_agent')
    expect(given).toMatchObject({ traceId: '4bf92f3577b34da6a3ce929d0e0e4736', parentSpanId: '00f067aa0ba902b7' })
    await sendWithHeaders(worker.url, 'capital of France?', { traceparent: '00-EVIL<script>-0000000000000000-01' })
    const agents = (await otlp.waitFor((received) => received.filter((span) => op(span) === 'invoke_agent').length >= 2)).filter((span) => op(span) === 'invoke_agent')
    expect(agents[1]!.parentSpanId).toBeUndefined()
    expect(agents[1]!.traceId).not.toBe('4bf92f3577b34da6a3ce929d0e0e4736')
    expect(worker.stderr()).toContain('ignoring a malformed traceparent of the A2A message (a new trace starts)')
    expect(worker.stderr()).not.toContain('EVIL')
  })

  it('Ctrl-C flushes before dsh run exits: the cancelled turns arrive, each with its cancellation event', async () => {
    const otlp = await receiver()
    const dir = tempDir()
    const script = join(dir, 'slow.yml')
    writeFileSync(script, ['- when: { prompt: "^slow child" }', '  reply: [{ text: "never", delay_ms: 600000 }]', '- when: { depth: 0 }', '  reply:', '    - call: { tool: subagent, args: { description: "slow", prompt: "slow child" } }', '    - text: "never"', ''].join('\n'))
    const sessions = join(dir, 'sessions')
    const run = spawn(process.execPath, [dshBin, 'run', '--model', `scripted:${script}`, '--session-dir', sessions, '--quiet', 'go'], {
      cwd: repoRoot,
      env: { ...process.env, DSH_HOME: tempDir('dsh-home-'), OTEL_EXPORTER_OTLP_ENDPOINT: otlp.origin },
      stdio: ['ignore', 'pipe', 'pipe'],
    })
    let stderr = ''
    run.stderr!.on('data', (chunk: Buffer) => (stderr += chunk))
    const exited = new Promise<number | null>((resolve) => run.on('close', (code) => resolve(code)))
    cleanups.push(async () => {
      if (run.exitCode === null && run.signalCode === null) run.kill('SIGKILL')
      await exited
    })
    // The child's model call is under way once the child's session records its step.
    await until(() => {
      try {
        return readdirSync(sessions).filter((name) => name.endsWith('.jsonl')).some((name) => readFileSync(join(sessions, name), 'utf8').includes('"parentSession"') && readFileSync(join(sessions, name), 'utf8').includes('"step/start"'))
      } catch {
        return false
      }
    }, () => (run.exitCode !== null ? `dsh run exited early: ${stderr}` : undefined))
    run.kill('SIGINT')
    expect(await exited).toBe(130)
    // The turns end at the cancel: their spans could only have come from the flush before exit (nothing is waited for after it).
    const agents = otlp.spans.filter((span) => op(span) === 'invoke_agent')
    expect(agents.map((span) => span.name).sort()).toEqual(['invoke_agent dsh', 'invoke_agent spawn'])
    for (const agent of agents) {
      expect(agent.attributes['dsh.stop_reason']).toBe('aborted')
      expect(agent.events.map((event) => event.name)).toContain('dsh.cancelled')
    }
    expect(new Set(otlp.spans.map((span) => span.traceId)).size).toBe(1)
  })

  it('dsh acp continues the trace of _meta.traceparent, and starts a new one, unechoed, for a malformed one or none', async () => {
    const otlp = await receiver()
    const dir = tempDir()
    const served = serveDsh(['--model', 'scripted:examples/acp-child.yml', '--session-dir', dir], { OTEL_EXPORTER_OTLP_ENDPOINT: otlp.origin })
    const { agent } = served.connection
    await agent.request(methods.agent.initialize, { protocolVersion: PROTOCOL_VERSION, clientCapabilities: {} })
    const prompt = async (meta: Record<string, unknown>) => {
      const { sessionId } = await agent.request(methods.agent.session.new, { cwd: realpathSync(dir), mcpServers: [], _meta: meta })
      await agent.request(methods.agent.session.prompt, { sessionId, prompt: [{ type: 'text', text: 'capital of France?' }] })
      return sessionId
    }
    const given = await prompt({ traceparent: '00-4bf92f3577b34da6a3ce929d0e0e4736-00f067aa0ba902b7-01', tracestate: 'vendor=1' })
    const malformed = await prompt({ traceparent: '00-\u001b]0;owned\u0007-xx-01' })
    const none = await prompt({})
    served.child.stdin!.end()
    expect((await served.exited).code).toBe(0)
    const turnOf = (session: string) => otlp.spans.find((span) => op(span) === 'invoke_agent' && span.attributes['gen_ai.conversation.id'] === session)!
    expect(turnOf(given)).toMatchObject({ traceId: '4bf92f3577b34da6a3ce929d0e0e4736', parentSpanId: '00f067aa0ba902b7' })
    for (const session of [malformed, none]) {
      expect(turnOf(session).parentSpanId).toBeUndefined()
      expect(turnOf(session).traceId).not.toBe('4bf92f3577b34da6a3ce929d0e0e4736')
    }
    expect(served.stderr()).toContain('ignoring a malformed traceparent of session/new (a new trace starts)')
    expect(served.stderr()).not.toContain('owned')
    // The given context is recorded in the session's header, the malformed one nowhere.
    const header = (session: string) => (JSON.parse(readFileSync(join(dir, `${session}.jsonl`), 'utf8').split('\n')[0]!) as { header: { trace?: unknown } }).header
    expect(header(given).trace).toEqual({ traceparent: '00-4bf92f3577b34da6a3ce929d0e0e4736-00f067aa0ba902b7-01', tracestate: 'vendor=1' })
    expect(header(malformed).trace).toBeUndefined()
  })

  it('dsh run started inside a trace (TRACEPARENT) puts its root turn there; a malformed TRACEPARENT is one warning and a new trace', async () => {
    const otlp = await receiver()
    const traceparent = '00-4bf92f3577b34da6a3ce929d0e0e4736-00f067aa0ba902b7-01'
    const inside = await runDsh(['run', '--model', 'scripted:examples/hello.yml', '--session-dir', tempDir(), '--quiet', 'hello'], { env: { OTEL_EXPORTER_OTLP_ENDPOINT: otlp.origin, TRACEPARENT: traceparent } })
    expect(inside.code, inside.stderr).toBe(0)
    expect(otlp.spans.find((span) => op(span) === 'invoke_agent')).toMatchObject({ traceId: '4bf92f3577b34da6a3ce929d0e0e4736', parentSpanId: '00f067aa0ba902b7' })
    const malformed = await runDsh(['run', '--model', 'scripted:examples/hello.yml', '--session-dir', tempDir(), '--quiet', 'hello'], { env: { OTEL_EXPORTER_OTLP_ENDPOINT: otlp.origin, TRACEPARENT: 'garbage-value' } })
    expect(malformed.code).toBe(0)
    expect(malformed.stderr.trim()).toBe('[warn] tracing: TRACEPARENT is not a W3C traceparent; the run starts a new trace')
    const roots = otlp.spans.filter((span) => op(span) === 'invoke_agent')
    expect(roots).toHaveLength(2)
    expect(roots[1]!.parentSpanId).toBeUndefined()
  })

  it('a delegation through the queue continues in the dsh worker that takes the job: its turn is under the parent\'s execute_tool', async () => {
    const otlp = await receiver()
    const redis = await startRedis()
    cleanups.push(() => redis.stop())
    const worker = spawn(process.execPath, [dshBin, 'worker', '--model', 'scripted:examples/acp-child.yml', '--session-dir', tempDir(), '--lock-ms', '1000'], {
      cwd: repoRoot,
      env: { ...process.env, DSH_HOME: tempDir('dsh-home-'), DSH_REDIS_URL: redis.url, OTEL_EXPORTER_OTLP_ENDPOINT: otlp.origin },
      stdio: ['ignore', 'pipe', 'pipe'],
    })
    let out = ''
    worker.stdout!.on('data', (chunk: Buffer) => (out += chunk))
    const exited = new Promise((resolve) => worker.on('close', resolve))
    cleanups.push(async () => {
      if (worker.exitCode === null && worker.signalCode === null) worker.kill('SIGTERM')
      await exited
    })
    await until(() => out.includes('taking jobs'), () => (worker.exitCode !== null ? `dsh worker exited ${worker.exitCode}` : undefined))
    const dir = tempDir()
    const config = join(dir, 'queue.yml')
    writeFileSync(config, '- id: subagent-queue\n  name: "@dsh/subagent-queue"\n  config:\n    queue: dsh\n- id: tool-subagent-queue\n  name: "@dsh/tool-subagent"\n  config:\n    provider: queue\n    toolName: subagent_queue\n')
    const script = join(dir, 'parent.yml')
    writeFileSync(script, '- when: { depth: 0 }\n  reply:\n    - call: { tool: subagent_queue, args: { description: "ask a worker", prompt: "What is the capital of France?" } }\n    - text: "The worker answered: {{last_tool_result}}"\n')
    const result = await runDsh(['run', '--config', config, '--model', `scripted:${script}`, '--session-dir', tempDir(), '--quiet', 'ask a worker'], { env: { DSH_REDIS_URL: redis.url, OTEL_EXPORTER_OTLP_ENDPOINT: otlp.origin } })
    expect(result.code, result.stderr).toBe(0)
    expect(result.stdout).toContain('Paris is the capital of France.')
    const spans = await otlp.waitFor((received) => received.filter((span) => op(span) === 'invoke_agent').length >= 2)
    const child = spans.find((span) => op(span) === 'invoke_agent' && span.attributes['dsh.delegation.depth'] === 1)!
    const call = spans.find((span) => span.spanId === child.parentSpanId)!
    expect(call.attributes['gen_ai.tool.name']).toBe('subagent_queue')
    expect(new Set(spans.map((span) => span.traceId)).size).toBe(1)
    expect(child.resource['process.pid']).toBe(worker.pid)
  })

  it('records prompts and completions when OTEL_INSTRUMENTATION_GENAI_CAPTURE_MESSAGE_CONTENT=true', async () => {
    const otlp = await receiver()
    const result = await runDsh(['run', '--model', 'scripted:examples/hello.yml', '--session-dir', tempDir(), '--quiet', 'hello there'], {
      env: { OTEL_EXPORTER_OTLP_ENDPOINT: otlp.origin, OTEL_INSTRUMENTATION_GENAI_CAPTURE_MESSAGE_CONTENT: 'true' },
    })
    expect(result.code, result.stderr).toBe(0)
    const spans = await otlp.waitFor((received) => received.some((span) => op(span) === 'chat'))
    const chat = spans.find((span) => op(span) === 'chat')!
    expect(JSON.parse(String(chat.attributes['gen_ai.input.messages']))).toEqual([{ role: 'user', parts: [{ type: 'text', content: 'hello there' }] }])
    expect(String(chat.attributes['gen_ai.output.messages'])).toContain('Hello! I am dsh')
  })

  it('with no OTEL_* set, nothing is sent and nothing is said', async () => {
    const otlp = await receiver()
    const result = await runDsh(['run', '--model', 'scripted:examples/hello.yml', '--session-dir', tempDir(), '--quiet', 'hello'])
    expect(result.code).toBe(0)
    expect(result.stderr).toBe('')
    expect(otlp.requests).toBe(0)
  })

  it.each(['refuses connections', 'hangs'] as const)('a collector that %s changes neither the exit nor the answer: the spans are dropped and one line says so', async (behaviour) => {
    const endpoint = behaviour === 'hangs' ? (await receiver('hang')).origin : await refusingEndpoint()
    const dir = tempDir()
    const result = await runDsh(['run', '--config', join(repoRoot, 'examples/delegate.yml'), '--model', 'scripted:examples/delegate-script.yml', '--session-dir', dir, '--quiet', 'review the plan'], {
      env: { OTEL_EXPORTER_OTLP_ENDPOINT: endpoint },
    })
    expect(result.code).toBe(0)
    expect(result.stdout).toContain('fix: add a down-migration first')
    const lines = result.stderr.trim().split('\n')
    expect(lines).toHaveLength(1)
    expect(lines[0]).toMatch(new RegExp(`^dsh: tracing: \\d+ spans dropped: the collector at ${endpoint.replace(/[.:/]/g, '\\$&')}/v1/traces did not take them \\(.+\\)$`))
  })

  it("the collector's credentials in OTEL_* (an endpoint's user and password, the exporter's headers) reach no command the model runs, no message and no session, and the spans still arrive", async () => {
    const otlp = await receiver()
    const dir = tempDir()
    const script = join(dir, 'env.yml')
    writeFileSync(script, ['- reply:', '    - call: { tool: bash, args: { command: "env" } }', '    - text: "the command saw: {{last_tool_result}}"'].join('\n'))
    const endpoint = otlp.origin.replace('http://', 'http://dsh:pa55w0rd@')
    const sessions = tempDir()
    const result = await runDsh(['run', '--model', `scripted:${script}`, '--session-dir', sessions, '--permission', 'allow', '--quiet', 'show the environment'], {
      env: { OTEL_EXPORTER_OTLP_ENDPOINT: endpoint, OTEL_EXPORTER_OTLP_HEADERS: 'api-key=h3ader-secret', OTEL_SERVICE_NAME: 'dsh-credentials-test' },
    })
    expect(result.code, result.stderr).toBe(0)
    // The command ran and saw the rest of OTEL_*, but not the credential, in either variable.
    expect(result.stdout).toContain('OTEL_SERVICE_NAME=dsh-credentials-test')
    expect(result.stdout).not.toContain('OTEL_EXPORTER_OTLP_ENDPOINT')
    expect(result.stdout + result.stderr).not.toMatch(/pa55w0rd|h3ader-secret/)
    const files = readdirSync(sessions, { recursive: true, encoding: 'utf8' }).filter((name) => name.endsWith('.jsonl'))
    expect(files.length).toBeGreaterThan(0)
    for (const name of files) expect(readFileSync(join(sessions, name), 'utf8')).not.toMatch(/pa55w0rd|h3ader-secret/)
    const spans = await otlp.waitFor((received) => received.some((span) => span.name === 'execute_tool bash'))
    expect(JSON.stringify(spans)).not.toMatch(/pa55w0rd|h3ader-secret/)
  })

  it("a collector that is not there is named without the credentials its endpoint carries", async () => {
    const endpoint = (await refusingEndpoint()).replace('http://', 'http://dsh:pa55w0rd@')
    const result = await runDsh(['run', '--model', 'scripted:examples/hello.yml', '--session-dir', tempDir(), '--quiet', 'hello'], { env: { OTEL_EXPORTER_OTLP_ENDPOINT: `${endpoint}/?api_key=t0ken` } })
    expect(result.code).toBe(0)
    const lines = result.stderr.trim().split('\n')
    expect(lines).toHaveLength(1)
    expect(lines[0]).toMatch(/^dsh: tracing: \d+ spans? dropped: the collector at http:\/\/127\.0\.0\.1:\d+\/v1\/traces \(its credentials not shown\) did not take them \(.+\)$/)
    expect(result.stderr).not.toMatch(/pa55w0rd|t0ken/)
  })

  it('a malformed OTEL_* value is one warning naming the variable (never echoing a header value), and the run goes on', async () => {
    const otlp = await receiver()
    const result = await runDsh(['run', '--model', 'scripted:examples/hello.yml', '--session-dir', tempDir(), '--quiet', 'hello'], {
      env: { OTEL_EXPORTER_OTLP_ENDPOINT: otlp.origin, OTEL_TRACES_SAMPLER: 'sometimes', OTEL_EXPORTER_OTLP_HEADERS: 'api-key secret-value-123' },
    })
    expect(result.code).toBe(0)
    const lines = result.stderr.trim().split('\n')
    expect(lines).toHaveLength(2)
    expect(lines.find((line) => line.includes('OTEL_TRACES_SAMPLER'))).toMatch(/must be one of .*"sometimes"/)
    expect(lines.find((line) => line.includes('OTEL_EXPORTER_OTLP_HEADERS'))).toBeDefined()
    expect(result.stderr).not.toContain('secret-value-123')
    await otlp.waitFor((received) => received.some((span) => op(span) === 'invoke_agent'))
  })
})

describe('dsh sessions trace', () => {
  /** A finished, untraced run of a parent with a spawn and a fork child; its root session id. */
  async function untracedRun(dir: string): Promise<string> {
    const result = await runDsh(['run', '--config', join(repoRoot, 'examples/delegate.yml'), '--model', 'scripted:examples/delegate-script.yml', '--session-dir', dir, '--quiet', 'review the plan'])
    expect(result.code, result.stderr).toBe(0)
    const roots = readdirSync(dir).filter((name) => name.endsWith('.jsonl')).map((name) => JSON.parse(readFileSync(join(dir, name), 'utf8').split('\n')[0]!) as { header: { id: string; parentSession?: string } }).filter(({ header }) => header.parentSession === undefined)
    expect(roots).toHaveLength(1)
    return roots[0]!.header.id
  }

  it('writes the stored tree of a finished run as one OTLP/JSON trace: each child under its delegating call, the recorded tokens, no content', async () => {
    const dir = tempDir()
    const root = await untracedRun(dir)
    const result = await runDsh(['sessions', 'trace', root.slice(-6), '--session-dir', dir])
    expect(result.code, result.stderr).toBe(0)
    const spans = decodeOtlpJson(result.stdout)
    expect(new Set(spans.map((span) => span.traceId)).size).toBe(1)
    const byId = new Map(spans.map((span) => [span.spanId, span]))
    const agents = spans.filter((span) => op(span) === 'invoke_agent')
    expect(agents.map((span) => span.name).sort()).toEqual(['invoke_agent dsh', 'invoke_agent fork', 'invoke_agent spawn'])
    for (const child of agents.filter((span) => span.attributes['dsh.delegation.depth'] === 1)) {
      const call = byId.get(child.parentSpanId!)!
      expect(call.attributes['gen_ai.tool.name']).toBe(child.attributes['dsh.subagent.provider'] === 'fork' ? 'subagent_fork' : 'subagent')
    }
    const usage = recordedUsage(dir)
    const chats = spans.filter((span) => op(span) === 'chat')
    expect(chats.map((chat) => chat.attributes['gen_ai.usage.output_tokens']).sort()).toEqual([...usage.values()].flat().map((answer) => answer.outputTokens).sort())
    expect(result.stdout).not.toContain('list the risks')
    // Each span keeps the time its events were recorded at.
    for (const span of spans) expect(span.endMs).toBeGreaterThanOrEqual(span.startMs)
  })

  it('--endpoint sends it to a collector, and a collector that is not there is one line and exit 1', async () => {
    const dir = tempDir()
    const root = await untracedRun(dir)
    const otlp = await receiver()
    const sent = await runDsh(['sessions', 'trace', root, '--session-dir', dir, '--endpoint', otlp.origin])
    expect(sent.code, sent.stderr).toBe(0)
    expect(sent.stdout).toBe('')
    expect(otlp.spans.filter((span) => op(span) === 'invoke_agent')).toHaveLength(3)
    expect(sent.stderr).toBe(`dsh sessions trace: sent ${otlp.spans.length} spans of 3 sessions to ${otlp.origin}/v1/traces\n`)
    const gone = await refusingEndpoint()
    const refused = await runDsh(['sessions', 'trace', root, '--session-dir', dir, '--endpoint', gone])
    expect(refused.code).toBe(1)
    expect(refused.stderr.trim().split('\n')).toHaveLength(1)
    expect(refused.stderr).toContain(`the collector at ${gone}/v1/traces did not take the trace`)
    const bad = await runDsh(['sessions', 'trace', root, '--session-dir', dir, '--endpoint', 'ftp://nowhere'])
    expect(bad.code).toBe(2)
    expect(bad.stderr).toContain('--endpoint must be an http(s) URL')
  })
})
