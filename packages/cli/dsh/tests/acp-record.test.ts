/** `dsh acp --record DIR` and `dsh acp --model replay:DIR`: an ACP server's sessions recorded and replayed. */
import { readdirSync, readFileSync, realpathSync, writeFileSync } from 'node:fs'
import { join } from 'node:path'
import { afterEach, describe, expect, it } from 'vitest'
import { methods, PROTOCOL_VERSION } from '@agentclientprotocol/sdk'
import { killRunning, serveDsh, type Served } from './acp-client.js'
import { tempDir } from './cli.js'

afterEach(killRunning)

async function askOnce(served: Served, dir: string, text: string): Promise<string> {
  const { agent } = served.connection
  await agent.request(methods.agent.initialize, { protocolVersion: PROTOCOL_VERSION, clientCapabilities: {} })
  const { sessionId } = await agent.request(methods.agent.session.new, { cwd: realpathSync(dir), mcpServers: [] })
  try {
    const result = await agent.request(methods.agent.session.prompt, { sessionId, prompt: [{ type: 'text', text }] })
    return result.stopReason
  } catch (error) {
    return `refused: ${error instanceof Error ? error.message : String(error)}`
  } finally {
    served.child.stdin!.end()
  }
}

describe('dsh acp --record and replay', () => {
  it('records the session of a session/new as root.jsonl, and a replaying server answers it the same way without the script', async () => {
    const dir = tempDir()
    const script = join(dir, 'model.yml')
    writeFileSync(script, '- reply:\n    - text: "recorded over ACP"\n')
    const recording = join(dir, 'recording')
    const recorder = serveDsh(['--model', `scripted:${script}`, '--session-dir', join(dir, 'a'), '--record', recording])
    expect(await askOnce(recorder, dir, 'hello over ACP')).toBe('end_turn')
    expect(await recorder.exited).toEqual({ code: 0, signal: null })
    expect(readdirSync(recording)).toEqual(['root.jsonl'])
    expect(readFileSync(join(recording, 'root.jsonl'), 'utf8').trim().split('\n').map((line) => JSON.parse(line) as { call?: number; response?: { end: string } }).at(-1)).toMatchObject({ call: 0, response: { end: 'finish' } })

    const replayer = serveDsh(['--model', `replay:${recording}`, '--session-dir', join(dir, 'b')])
    expect(await askOnce(replayer, dir, 'hello over ACP')).toBe('end_turn')
    expect(await replayer.exited, replayer.stderr()).toEqual({ code: 0, signal: null })
    const [replayed] = readdirSync(join(dir, 'b')).filter((name) => name.endsWith('.jsonl'))
    expect(readFileSync(join(dir, 'b', replayed), 'utf8')).toContain('recorded over ACP')
  })

  it('a replaying server whose client asks something else reports the divergence when it closes and exits 1', async () => {
    const dir = tempDir()
    const script = join(dir, 'model.yml')
    writeFileSync(script, '- reply:\n    - text: "recorded over ACP"\n')
    const recording = join(dir, 'recording')
    const recorder = serveDsh(['--model', `scripted:${script}`, '--session-dir', join(dir, 'a'), '--record', recording])
    await askOnce(recorder, dir, 'hello over ACP')
    await recorder.exited
    const replayer = serveDsh(['--model', `replay:${recording}`, '--session-dir', join(dir, 'b')])
    expect(await askOnce(replayer, dir, 'goodbye over ACP')).toContain('replay diverged')
    expect((await replayer.exited).code).toBe(1)
    expect(replayer.stderr()).toContain('dsh acp: replay diverged: session root, call 0: prompt differs: recorded "hello over ACP", live "goodbye over ACP"')
  })

  it('a client cannot make the server record into a directory its parent did not grant: the link is refused and no file is written', async () => {
    const dir = tempDir()
    const script = join(dir, 'model.yml')
    writeFileSync(script, '- reply:\n    - text: "hello"\n')
    const victim = join(dir, 'victim')
    const { mkdirSync } = await import('node:fs')
    mkdirSync(victim)
    writeFileSync(join(victim, 'important.jsonl'), '{"precious":"data"}\n')
    // Not started by a recording parent: no DSH_RECORDING_DIR grant.
    const served = serveDsh(['--model', `scripted:${script}`, '--session-dir', join(dir, 'sessions'), '--permission', 'reject'])
    const { agent } = served.connection
    await agent.request(methods.agent.initialize, { protocolVersion: PROTOCOL_VERSION, clientCapabilities: {} })
    const refused = await agent
      .request(methods.agent.session.new, { cwd: realpathSync(dir), mcpServers: [], _meta: { dsh: { recording: { mode: 'record', dir: victim, lineage: 'important' } } } })
      .then(() => 'accepted', (error: unknown) => (error instanceof Error ? error.message : String(error)))
    served.child.stdin!.end()
    await served.exited
    expect(refused).toMatch(/records or replays only into the directory the process that started it granted/)
    expect(readFileSync(join(victim, 'important.jsonl'), 'utf8')).toBe('{"precious":"data"}\n')
    expect(readdirSync(victim)).toEqual(['important.jsonl'])
  })
})
