/**
 * One connection, many sessions: `dsh acp` keeps a bounded set live (idle ones beyond it
 * are parked and reopened on their next prompt), and `session/close` releases a session.
 */
import { readFileSync, realpathSync, writeFileSync } from 'node:fs'
import { join } from 'node:path'
import { afterEach, describe, expect, it } from 'vitest'
import { methods, PROTOCOL_VERSION, RequestError } from '@agentclientprotocol/sdk'
import { killTrustRunning, openDescriptors, serveTrusted } from './acp-trust-client.js'
import { tempDir } from './cli.js'

afterEach(killTrustRunning)

async function started() {
  const dir = realpathSync(tempDir())
  const model = join(dir, 'model.yml')
  writeFileSync(model, '- reply: [{ text: "answer one" }, { text: "answer two" }]\n')
  const served = serveTrusted(['--model', `scripted:${model}`, '--session-dir', dir])
  const { agent } = served.connection
  const init = await agent.request(methods.agent.initialize, { protocolVersion: PROTOCOL_VERSION, clientCapabilities: {} })
  const open = async () => (await agent.request(methods.agent.session.new, { cwd: dir, mcpServers: [] })).sessionId
  const prompt = (sessionId: string, text: string) => agent.request(methods.agent.session.prompt, { sessionId, prompt: [{ type: 'text', text }] })
  return { dir, served, agent, init, open, prompt }
}

describe('dsh acp sessions on one connection', () => {
  it('300 sessions, each prompted, leave descriptors flat; a parked session answers its next prompt with its history', async () => {
    const { dir, served, open, prompt } = await started()
    const pid = served.child.pid!
    const ids: string[] = []
    let baseline = 0
    for (let i = 0; i < 300; i++) {
      const id = await open()
      ids.push(id)
      expect(await prompt(id, `hello ${i}`)).toMatchObject({ stopReason: 'end_turn' })
      if (i === 29) baseline = openDescriptors(pid)
    }
    const after = openDescriptors(pid)
    // Flat: the last 270 sessions added (almost) nothing; a few descriptors come and go with timing.
    expect(after).toBeLessThanOrEqual(baseline + 4)
    // The first session was parked long ago: it is reopened from its file and continues it.
    expect(await prompt(ids[0], 'again')).toMatchObject({ stopReason: 'end_turn' })
    served.child.stdin!.end()
    expect((await served.exited).code).toBe(0)
    const events = readFileSync(join(dir, `${ids[0]}.jsonl`), 'utf8').trim().split('\n').map((line) => JSON.parse(line) as { type?: string; message?: { content: { text?: string }[] } })
    const answers = events.filter((event) => event.type === 'assistant/message').map((event) => event.message!.content.map((block) => block.text).join(''))
    expect(answers).toEqual(['answer one', 'answer two'])
  }, 300_000)

  it('session/close is advertised, cancels a running prompt, releases the session, and a prompt to it afterwards is not found', async () => {
    const { served, init, open, prompt, agent } = await started()
    expect(init.agentCapabilities?.sessionCapabilities?.close).toEqual({})
    const pid = served.child.pid!
    const before = openDescriptors(pid)
    const ids = [await open(), await open(), await open()]
    for (const id of ids) await prompt(id, 'hello')
    for (const id of ids) expect(await agent.request(methods.agent.session.close, { sessionId: id })).toEqual({})
    expect(openDescriptors(pid)).toBeLessThanOrEqual(before + 1)
    const error = await prompt(ids[0], 'still there?').then(
      () => undefined,
      (failure: unknown) => failure,
    )
    expect(error).toBeInstanceOf(RequestError)
    expect((error as RequestError).code).toBe(-32002)
    served.child.stdin!.end()
    expect((await served.exited).code).toBe(0)
  })
})
