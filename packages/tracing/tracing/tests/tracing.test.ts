/**
 * The tracer in one process, against the real agent services (only the model is
 * scripted) and the testkit's OTLP receiver: what each kind of turn end records, content
 * only when asked, attributes cut to the limit, and the settings' one-line warnings.
 */
import { afterEach, describe, expect, it } from 'vitest'
import { createHarness, gateTool, type Harness } from '@dsh/testkit/harness'
import { startOtlpReceiver, type OtlpReceiver } from '@dsh/testkit/otlp'
import * as tracing from '../src/index.js'
import { tracingSettings, type TracingConfig } from '../src/settings.js'

let harness: Harness | undefined
let otlp: OtlpReceiver | undefined
afterEach(async () => {
  await harness?.dispose()
  await otlp?.close()
  harness = otlp = undefined
})

async function traced(script: Parameters<typeof createHarness>[0], config: TracingConfig = {}): Promise<{ harness: Harness; otlp: OtlpReceiver }> {
  otlp = await startOtlpReceiver()
  harness = await createHarness(script)
  await harness.plugin(tracing, { endpoint: otlp.origin, ...config })
  return { harness, otlp }
}

describe('@dsh/tracing in one process', () => {
  it('a cancelled turn ends its spans with a cancellation event, and the disposal flushes them', async () => {
    const { harness, otlp } = await traced({ script: [{ reply: [{ call: { tool: 'gate', args: {} } }, { text: 'never' }] }] })
    const gate = gateTool(harness)
    const agent = await harness.agent()
    const turn = agent.followup('wait at the gate')
    await gate.entered
    agent.cancel(new Error('the user pressed Ctrl-C'))
    // The gate does not listen to the signal; letting it go ends the cancelled turn.
    gate.release()
    expect((await turn).reason).toBe('aborted')
    await harness.dispose()
    const spans = await otlp.waitFor((received) => received.some((span) => span.name.startsWith('invoke_agent')))
    const root = spans.find((span) => span.name === 'invoke_agent dsh')!
    expect(root.attributes['dsh.stop_reason']).toBe('aborted')
    expect(root.events.map((event) => event.name)).toContain('dsh.cancelled')
    const call = spans.find((span) => span.name === 'execute_tool gate')!
    expect(call.parentSpanId).toBe(root.spanId)
    expect(call.endMs).toBeGreaterThanOrEqual(call.startMs)
  })

  it('a turn that ends in error has error status and an exception event', async () => {
    const { harness, otlp } = await traced({ script: [{ reply: [{ call: { tool: 'gate', args: {} } }, { call: { tool: 'gate', args: {} } }] }], maxSteps: 1 })
    const gate = gateTool(harness)
    const agent = await harness.agent()
    const turn = agent.followup('loop')
    await gate.entered
    gate.release()
    expect((await turn).reason).toBe('error')
    await harness.dispose()
    const [root] = (await otlp.waitFor((received) => received.some((span) => span.name === 'invoke_agent dsh'))).filter((span) => span.name === 'invoke_agent dsh')
    expect(root!.status.code).toBe(2)
    expect(root!.attributes['error.type']).toBe('error')
    expect(root!.events.map((event) => event.name)).toContain('exception')
  })

  it("a turn's error text is content: with capture off only its type is exported (no exception.message, no status message); with capture on it is", async () => {
    const failing = { script: [{ reply: [{ error: 'the model failed on "the secret plan: SECRET-PLAN-42"' }] }, { reply: [{ error: 'the model failed on "the secret plan: SECRET-PLAN-42"' }] }] }
    const rootOf = async (captureContent: boolean) => {
      const { harness, otlp } = await traced(failing, { captureContent })
      const agent = await harness.agent()
      expect((await agent.followup('the secret plan')).reason).toBe('error')
      await harness.dispose()
      const spans = await otlp.waitFor((received) => received.some((span) => span.name === 'invoke_agent dsh'))
      await otlp.close()
      return spans.find((span) => span.name === 'invoke_agent dsh')!
    }
    const quiet = await rootOf(false)
    expect(quiet.status.code).toBe(2)
    expect(quiet.attributes['error.type']).toBe('error')
    const exception = quiet.events.find((event) => event.name === 'exception')!
    expect(exception.attributes).toEqual({ 'exception.type': 'dsh.turn_error' })
    expect(JSON.stringify(quiet)).not.toContain('SECRET-PLAN-42')
    const captured = await rootOf(true)
    expect(captured.events.find((event) => event.name === 'exception')!.attributes['exception.message']).toContain('SECRET-PLAN-42')
  })

  it("an MCP server's tool call (mcp__<server>__<tool>) names its server in dsh.mcp.server; the process's own tools carry none", async () => {
    const { harness, otlp } = await traced({ script: [{ reply: [{ calls: [{ tool: 'mcp__docs_srv__read_file', args: {} }, { tool: 'lookup', args: {} }] }, { text: 'done' }] }] })
    for (const name of ['mcp__docs_srv__read_file', 'lookup']) harness.ctx.tools.register({ name, description: 'answers', parameters: { type: 'object' }, execute: async () => 'ok' })
    const agent = await harness.agent()
    await agent.followup('read it')
    await harness.dispose()
    const spans = await otlp.waitFor((received) => received.filter((span) => span.name.startsWith('execute_tool')).length === 2)
    expect(spans.find((span) => span.name === 'execute_tool mcp__docs_srv__read_file')!.attributes['dsh.mcp.server']).toBe('docs_srv')
    expect(spans.find((span) => span.name === 'execute_tool lookup')!.attributes).not.toHaveProperty('dsh.mcp.server')
  })

  it('content is recorded only with captureContent, and a huge value is cut to the attribute limit', async () => {
    const huge = 'x'.repeat(20_000)
    const { harness, otlp } = await traced({ script: [{ reply: [{ text: huge }] }] }, { captureContent: true, attributeValueLengthLimit: 256 })
    const agent = await harness.agent()
    await agent.followup('say a lot')
    await harness.dispose()
    const [chat] = (await otlp.waitFor((received) => received.some((span) => span.attributes['gen_ai.operation.name'] === 'chat'))).filter((span) => span.attributes['gen_ai.operation.name'] === 'chat')
    expect(String(chat!.attributes['gen_ai.output.messages'])).toHaveLength(256)
    expect(String(chat!.attributes['gen_ai.input.messages'])).toContain('say a lot')
  })

  it('a child session whose header carries a trace context continues that trace under the given span', async () => {
    const { harness, otlp } = await traced({ script: [{ reply: [{ text: 'ok' }] }] })
    const traceparent = '00-4bf92f3577b34da6a3ce929d0e0e4736-00f067aa0ba902b7-01'
    const agent = await harness.agent({ meta: { origin: 'acp', parentSession: 'remote', delegationDepth: 1, provider: 'acp', trace: { traceparent } } })
    await agent.followup('hi')
    await harness.dispose()
    const [turn] = await otlp.waitFor((received) => received.some((span) => span.name === 'invoke_agent acp'))
    const root = otlp.spans.find((span) => span.name === 'invoke_agent acp')!
    expect(turn).toBeDefined()
    expect(root.traceId).toBe('4bf92f3577b34da6a3ce929d0e0e4736')
    expect(root.parentSpanId).toBe('00f067aa0ba902b7')
  })
})

describe('tracing settings', () => {
  const settingsOf = (env: NodeJS.ProcessEnv, config: TracingConfig = {}) => {
    const warnings: string[] = []
    return { settings: tracingSettings(config, env, (line) => warnings.push(line)), warnings }
  }

  it('reads the standard variables', () => {
    const { settings, warnings } = settingsOf({
      OTEL_EXPORTER_OTLP_ENDPOINT: 'http://collector:4318/',
      OTEL_EXPORTER_OTLP_HEADERS: 'api-key=abc%20def,x=1',
      OTEL_SERVICE_NAME: 'agents',
      OTEL_TRACES_SAMPLER: 'traceidratio',
      OTEL_TRACES_SAMPLER_ARG: '0.25',
      OTEL_INSTRUMENTATION_GENAI_CAPTURE_MESSAGE_CONTENT: 'TRUE',
    })
    expect(warnings).toEqual([])
    expect(settings).toMatchObject({ url: 'http://collector:4318/v1/traces', headers: { 'api-key': 'abc def', x: '1' }, serviceName: 'agents', sampler: 'traceidratio', samplerRatio: 0.25, captureContent: true })
    expect(settingsOf({ OTEL_EXPORTER_OTLP_TRACES_ENDPOINT: 'https://c.example/custom' }).settings.url).toBe('https://c.example/custom')
  })

  it('a malformed value is one warning naming the variable, and its default is used; a header value is never repeated', () => {
    const { settings, warnings } = settingsOf({
      OTEL_EXPORTER_OTLP_ENDPOINT: 'collector:4318',
      OTEL_EXPORTER_OTLP_HEADERS: 'Authorization Bearer s3cr3t',
      OTEL_TRACES_SAMPLER: 'jaeger_remote',
      OTEL_TRACES_SAMPLER_ARG: '2',
      OTEL_BSP_SCHEDULE_DELAY: 'soon',
      OTEL_EXPORTER_OTLP_PROTOCOL: 'grpc',
    })
    expect(warnings).toHaveLength(6)
    for (const name of ['OTEL_EXPORTER_OTLP_ENDPOINT', 'OTEL_EXPORTER_OTLP_HEADERS', 'OTEL_TRACES_SAMPLER', 'OTEL_TRACES_SAMPLER_ARG', 'OTEL_BSP_SCHEDULE_DELAY', 'OTEL_EXPORTER_OTLP_PROTOCOL']) {
      expect(warnings.filter((line) => line.split(/[ :]/)[0] === name)).toHaveLength(1)
    }
    expect(warnings.join('\n')).not.toContain('s3cr3t')
    expect(warnings.every((line) => !line.includes('\n'))).toBe(true)
    expect(settings).toMatchObject({ url: 'http://localhost:4318/v1/traces', headers: {}, sampler: 'parentbased_always_on', samplerRatio: 1, scheduledDelayMs: 1000 })
  })

  it("an endpoint's user, password and query are never shown: not in a warning, not in what an exporter's error would repeat", () => {
    const { settings, warnings } = settingsOf({ OTEL_EXPORTER_OTLP_TRACES_ENDPOINT: 'ftp://dsh:pa55w0rd@collector.example/?api_key=t0ken', OTEL_EXPORTER_OTLP_ENDPOINT: 'https://dsh:pa55w0rd@collector.example:4318/base?api_key=t0ken' })
    expect(warnings).toHaveLength(1)
    expect(warnings[0]).toMatch(/^OTEL_EXPORTER_OTLP_TRACES_ENDPOINT must be an http\(s\) URL, not ftp:\/\/collector\.example\/ \(its credentials not shown\); ignoring it$/)
    expect(settings.url).toBe('https://dsh:pa55w0rd@collector.example:4318/base/v1/traces?api_key=t0ken')
    expect(tracing.shownEndpoint(settings.url)).toBe('https://collector.example:4318/base/v1/traces (its credentials not shown)')
    expect(tracing.shownEndpoint('http://127.0.0.1:4318/v1/traces')).toBe('http://127.0.0.1:4318/v1/traces')
    expect(tracing.shownEndpoint('Bearer pa55w0rd')).not.toContain('pa55w0rd')
    expect(tracing.withoutCredentials('request to https://dsh:pa55w0rd@collector.example:4318/base/v1/traces?api_key=t0ken failed', settings.url)).toBe('request to https://***:***@collector.example:4318/base/v1/traces?*** failed')
    expect(settingsOf({ OTEL_EXPORTER_OTLP_ENDPOINT: 'collector:4318/?key=t0ken' }).warnings.join('\n')).not.toContain('t0ken')
  })

  it('the config entry wins over the environment', () => {
    const { settings } = settingsOf({ OTEL_EXPORTER_OTLP_ENDPOINT: 'http://env:4318', OTEL_SERVICE_NAME: 'env' }, { endpoint: 'http://config:4318', serviceName: 'config', captureContent: false })
    expect(settings).toMatchObject({ url: 'http://config:4318/v1/traces', serviceName: 'config', captureContent: false })
  })
})
