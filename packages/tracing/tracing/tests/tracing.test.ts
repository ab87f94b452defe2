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

  it('the config entry wins over the environment', () => {
    const { settings } = settingsOf({ OTEL_EXPORTER_OTLP_ENDPOINT: 'http://env:4318', OTEL_SERVICE_NAME: 'env' }, { endpoint: 'http://config:4318', serviceName: 'config', captureContent: false })
    expect(settings).toMatchObject({ url: 'http://config:4318/v1/traces', serviceName: 'config', captureContent: false })
  })
})
