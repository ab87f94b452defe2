/** A `dsh acp` prompt answers only once the continuable children it started are done with. */
import { realpathSync, writeFileSync } from 'node:fs'
import { join } from 'node:path'
import { afterEach, describe, expect, it } from 'vitest'
import { methods, PROTOCOL_VERSION } from '@agentclientprotocol/sdk'
import { killTrustRunning, serveTrusted } from './acp-trust-client.js'
import { tempDir } from './cli.js'

afterEach(killTrustRunning)

describe('dsh acp with a continuable child', () => {
  it('the prompt answers after the child settled and the agent took its notice, not before', async () => {
    const dir = tempDir()
    const config = join(dir, 'dsh.yml')
    writeFileSync(config, ['- id: tool-subagent-keep', '  name: "@dsh/tool-subagent"', '  config: { provider: spawn, toolName: subagent_keep, backgroundMode: continuable }'].join('\n'))
    const model = join(dir, 'model.yml')
    writeFileSync(model, [
      '- when: { prompt: "^research" }',
      '  reply:',
      '    - { text: "child finding", delay_ms: 300 }',
      '- when: { depth: 0 }',
      '  reply:',
      '    - call: { tool: subagent_keep, args: { description: research, prompt: "research the repo", run_in_background: true } }',
      '    - text: "started the researcher"',
      '    - text: "NOTICE TAKEN"',
    ].join('\n'))
    const served = serveTrusted(['--config', config, '--model', `scripted:${model}`, '--session-dir', dir])
    const { agent } = served.connection
    await agent.request(methods.agent.initialize, { protocolVersion: PROTOCOL_VERSION, clientCapabilities: {} })
    const session = await agent.buildSession(realpathSync(dir)).start()
    void session.prompt('start a researcher')
    let text = ''
    let stop: string | undefined
    while (!stop) {
      const message = await session.nextUpdate()
      if (message.kind === 'stop') stop = message.stopReason
      else if (message.update.sessionUpdate === 'agent_message_chunk' && message.update.content.type === 'text') text += message.update.content.text
    }
    expect(stop).toBe('end_turn')
    // Streamed before the answer: the turn the child's settlement notice started.
    expect(text).toContain('started the researcher')
    expect(text).toContain('NOTICE TAKEN')
    served.child.stdin!.end()
    expect((await served.exited).code).toBe(0)
  })
})
