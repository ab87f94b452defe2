/**
 * `dsh acp` takes only one of its own allow options as an allow: a client's `cancelled`, an
 * option id it never offered (however close to one), one that is not text or is missing, an
 * outcome that is not a selection, and its reject option allow nothing. Each answer is given
 * by the official SDK client to one command of one prompt; the command it answers must not
 * run, and the session records a rejection.
 */
import { existsSync, readFileSync, realpathSync, writeFileSync } from 'node:fs'
import { join } from 'node:path'
import { afterEach, describe, expect, it } from 'vitest'
import { methods, PROTOCOL_VERSION, type RequestPermissionRequest, type RequestPermissionResponse } from '@agentclientprotocol/sdk'
import { killTrustRunning, serveTrusted } from './acp-trust-client.js'
import { tempDir } from './cli.js'

afterEach(killTrustRunning)

/** Answers no client should be taken as allowing anything, by name. */
const NOT_ALLOWS: Record<string, unknown> = {
  cancelled: { outcome: 'cancelled' },
  'cancelled, with an allow option id': { outcome: 'cancelled', optionId: 'allow-once' },
  'an outcome that is not a selection, with an allow option id': { outcome: 'approved', optionId: 'allow-always' },
  'an option never offered': { outcome: 'selected', optionId: 'allow' },
  'an option id in other case': { outcome: 'selected', optionId: 'Allow-Once' },
  'an option id with a space after it': { outcome: 'selected', optionId: 'allow-once ' },
  'an option id of an inherited property': { outcome: 'selected', optionId: 'constructor' },
  'an option id that is a number': { outcome: 'selected', optionId: 1 },
  'an option id that is a list': { outcome: 'selected', optionId: ['allow-once'] },
  'a selection without an option': { outcome: 'selected' },
  'the reject option': { outcome: 'selected', optionId: 'reject' },
}

describe('dsh acp answers that are not an allow', () => {
  it('a cancelled, unknown, malformed or rejecting answer runs nothing; the allow options offered still run theirs', async () => {
    const dir = realpathSync(tempDir())
    const cases = [...Object.keys(NOT_ALLOWS), 'allow once, as offered']
    const marker = (index: number) => join(dir, `case-${index}`)
    const model = join(dir, 'model.yml')
    writeFileSync(model, ['- reply:', ...cases.map((_, index) => `    - call: { tool: bash, args: { command: "touch ${marker(index)}" } }`), '    - text: "done"'].join('\n'))
    // Each command is answered by the case its marker names.
    const answer = (request: RequestPermissionRequest): RequestPermissionResponse => {
      const index = Number(/case-(\d+)$/.exec(request.toolCall.title ?? '')![1])
      const name = cases[index]!
      return { outcome: (NOT_ALLOWS[name] ?? { outcome: 'selected', optionId: request.options.find((option) => option.kind === 'allow_once')!.optionId }) as RequestPermissionResponse['outcome'] }
    }
    const served = serveTrusted(['--model', `scripted:${model}`, '--session-dir', dir], answer)
    const { agent } = served.connection
    await agent.request(methods.agent.initialize, { protocolVersion: PROTOCOL_VERSION, clientCapabilities: {} })
    const session = await agent.buildSession(dir).start()
    void session.prompt('run them')
    let stop: string | undefined
    while (!stop) {
      const message = await session.nextUpdate()
      if (message.kind === 'stop') stop = message.stopReason
    }
    served.child.stdin!.end()
    expect((await served.exited).code).toBe(0)
    expect(stop).toBe('end_turn')
    expect(served.asked).toHaveLength(cases.length)
    const recorded = readFileSync(join(dir, `${session.sessionId}.jsonl`), 'utf8').trim().split('\n').map((line) => JSON.parse(line) as { type?: string; permission?: { decision: string } })
    const decisions = recorded.filter((line) => line.type === 'tool/result').map((line) => line.permission?.decision)
    const outcome = cases.map((name, index) => ({ name, ran: existsSync(marker(index)), decision: decisions[index] }))
    expect(outcome).toEqual(cases.map((name) => (name in NOT_ALLOWS ? { name, ran: false, decision: 'reject' } : { name, ran: true, decision: 'allow-once' })))
  })
})
