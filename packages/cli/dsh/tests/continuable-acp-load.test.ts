/**
 * `dsh acp` reopens a stored session with `session/load`, as an editor does after a
 * restart: real `dsh acp` processes, the SDK's client app, and a fake OpenAI-compatible
 * model server on 127.0.0.1 that records every request, so the test can read exactly what
 * context the model was given after the reopen.
 */
import { spawn } from 'node:child_process'
import { existsSync, readFileSync, realpathSync, writeFileSync } from 'node:fs'
import { join } from 'node:path'
import { PassThrough, Readable, Writable } from 'node:stream'
import { afterEach, describe, expect, it } from 'vitest'
import { client, methods, ndJsonStream, PROTOCOL_VERSION, type ClientConnection, type SessionNotification } from '@agentclientprotocol/sdk'
import { startFakeOpenAIChat, type FakeOpenAIChat } from '@dsh/testkit'
import { killRunning, running } from './acp-client.js'
import { dshBin, repoRoot, tempDir } from './cli.js'

let fake: FakeOpenAIChat | undefined
afterEach(async () => {
  killRunning()
  await fake?.close()
  fake = undefined
})

/** A config that adds an OpenAI-compatible adapter named `fake` pointed at the fake server. */
function fakeModelConfig(server: FakeOpenAIChat): string {
  const file = join(tempDir('dsh-acp-load-config-'), 'dsh.yml')
  writeFileSync(file, ['- id: llm-fake', '  name: "@dsh/llm-openai"', `  config: { name: fake, baseURL: "${server.url}", apiKeyEnv: FAKE_MODEL_AUTH, model: fake-model }`].join('\n'))
  return file
}

interface DshAcp {
  connection: ClientConnection
  /** Every `session/update` received, in order. */
  updates: SessionNotification[]
  stderr(): string
  exited: Promise<{ code: number | null; signal: NodeJS.Signals | null }>
  /** Close its stdin, as a client that goes away does. */
  leave(): void
}

/** `dsh acp` as a real process, with an SDK client that records every update it is sent. */
function startDshAcp(home: string, config: string): DshAcp {
  const child = spawn(process.execPath, [dshBin, 'acp', '--config', config, '--model', 'fake', '--permission', 'allow'], {
    cwd: repoRoot,
    env: { ...process.env, DSH_HOME: home, DEEPSEEK_API_KEY: '', OPENAI_API_KEY: '', FAKE_MODEL_AUTH: 'loopback' },
    stdio: ['pipe', 'pipe', 'pipe'],
  })
  running.push(child)
  let stderr = ''
  child.stderr!.on('data', (chunk: Buffer) => (stderr += chunk.toString('utf8')))
  const stdout = new PassThrough()
  child.stdout!.pipe(stdout)
  const exited = new Promise<{ code: number | null; signal: NodeJS.Signals | null }>((resolve) => child.on('close', (code, signal) => resolve({ code, signal })))
  const updates: SessionNotification[] = []
  const connection = client({ name: 'continuable-acp-load' })
    .onNotification(methods.client.session.update, ({ params }) => void updates.push(params))
    .connect(ndJsonStream(Writable.toWeb(child.stdin!) as WritableStream<Uint8Array>, Readable.toWeb(stdout) as ReadableStream<Uint8Array>))
  return { connection, updates, stderr: () => stderr, exited, leave: () => child.stdin!.end() }
}

/** The file's text once it contains `needle` (another process writes it), polled. */
async function fileOnceItHolds(file: string, needle: string): Promise<string> {
  for (;;) {
    const text = existsSync(file) ? readFileSync(file, 'utf8') : ''
    if (text.includes(needle)) return text
    await new Promise((resolve) => setTimeout(resolve, 20))
  }
}

async function initialize(served: DshAcp) {
  return served.connection.agent.request(methods.agent.initialize, { protocolVersion: PROTOCOL_VERSION, clientCapabilities: {} })
}

const prompt = (served: DshAcp, sessionId: string, text: string) => served.connection.agent.request(methods.agent.session.prompt, { sessionId, prompt: [{ type: 'text', text }] })

/** The chat messages of one recorded model request, as role and text. */
function conversationOf(request: FakeOpenAIChat['requests'][number]): string[] {
  const { messages } = request.body as { messages: Array<{ role: string; content?: unknown; tool_calls?: Array<{ function: { name: string } }> }> }
  return messages
    .filter((message) => message.role !== 'system')
    .map((message) => {
      const text = typeof message.content === 'string' ? message.content : Array.isArray(message.content) ? message.content.map((part: { text?: string }) => part.text ?? '').join('') : ''
      const calls = message.tool_calls?.map((call) => ` [calls ${call.function.name}]`).join('') ?? ''
      return `${message.role}: ${text.trim()}${calls}`
    })
}

describe('dsh acp session/load', () => {
  it('a restarted dsh acp reopens the session with session/load: the conversation is replayed, then a prompt continues it with every earlier turn in context', async () => {
    fake = await startFakeOpenAIChat([
      { text: 'Let me check.', toolCalls: [{ name: 'bash', arguments: { command: 'echo marker-from-the-tool' } }] },
      { text: 'The word is apple.' },
      { text: 'Both turns are in my context.' },
    ])
    const home = tempDir('dsh-acp-load-home-')
    const config = fakeModelConfig(fake)
    const cwd = realpathSync(tempDir('dsh-acp-load-cwd-'))

    const first = startDshAcp(home, config)
    expect((await initialize(first)).agentCapabilities?.loadSession).toBe(true)
    const { sessionId } = await first.connection.agent.request(methods.agent.session.new, { cwd, mcpServers: [] })
    expect(await prompt(first, sessionId, 'remember the word apple, and run the tool')).toMatchObject({ stopReason: 'end_turn' })
    first.leave()
    expect((await first.exited).code).toBe(0)

    const second = startDshAcp(home, config)
    expect((await initialize(second)).agentCapabilities?.loadSession).toBe(true)
    expect(await second.connection.agent.request(methods.agent.session.load, { sessionId, cwd, mcpServers: [] })).toEqual({})
    const replay = second.updates.map(({ sessionId: id, update }) => {
      expect(id).toBe(sessionId)
      switch (update.sessionUpdate) {
        case 'user_message_chunk':
          return `user: ${update.content.type === 'text' ? update.content.text : ''}`
        case 'agent_message_chunk':
          return `agent: ${update.content.type === 'text' ? update.content.text : ''}`
        case 'tool_call':
          return `tool_call ${update.title} ${JSON.stringify(update.rawInput)}`
        case 'tool_call_update':
          return `tool_call_update ${update.status} ${JSON.stringify(update.content)}`
        default:
          return update.sessionUpdate
      }
    })
    expect(replay).toEqual([
      'user: remember the word apple, and run the tool',
      'agent: Let me check.',
      'tool_call bash {"command":"echo marker-from-the-tool"}',
      expect.stringMatching(/^tool_call_update completed .*marker-from-the-tool/),
      'agent: The word is apple.',
    ])

    expect(await prompt(second, sessionId, 'what was the word?')).toMatchObject({ stopReason: 'end_turn' })
    // The model's request for the new turn carried the whole earlier turn, tool result included.
    const context = conversationOf(fake.requests.at(-1)!)
    expect(context).toEqual([
      'user: remember the word apple, and run the tool',
      'assistant: Let me check. [calls bash]',
      expect.stringMatching(/^tool: [\s\S]*marker-from-the-tool/),
      'assistant: The word is apple.',
      'user: what was the word?',
    ])
    second.leave()
    expect((await second.exited).code).toBe(0)

    // The file holds both turns, in one session.
    const events = readFileSync(join(home, 'sessions', `${sessionId}.jsonl`), 'utf8').trim().split('\n').map((line) => JSON.parse(line) as { type?: string })
    expect(events.filter((event) => event.type === 'turn/start')).toHaveLength(2)
  })

  it('a session live in another dsh acp is refused with its in-use error; an unknown id is resource-not-found; neither changes a file', async () => {
    fake = await startFakeOpenAIChat([{ text: 'first answer' }])
    const home = tempDir('dsh-acp-load-home-')
    const config = fakeModelConfig(fake)
    const cwd = realpathSync(tempDir('dsh-acp-load-cwd-'))
    const holder = startDshAcp(home, config)
    await initialize(holder)
    const { sessionId } = await holder.connection.agent.request(methods.agent.session.new, { cwd, mcpServers: [] })
    await prompt(holder, sessionId, 'hello')
    const file = join(home, 'sessions', `${sessionId}.jsonl`)
    // The holder writes its events behind the turn: wait until the turn is on disk.
    const before = await fileOnceItHolds(file, '"turn/end"')

    const other = startDshAcp(home, config)
    await initialize(other)
    await expect(other.connection.agent.request(methods.agent.session.load, { sessionId, cwd, mcpServers: [] })).rejects.toMatchObject({
      code: -32600,
      message: expect.stringMatching(new RegExp(`session ${sessionId} is in use by .*wait for that process to finish`)),
    })
    await expect(other.connection.agent.request(methods.agent.session.load, { sessionId: 'not-a-stored-session', cwd, mcpServers: [] })).rejects.toMatchObject({
      code: -32002,
      message: expect.stringContaining('no stored dsh session not-a-stored-session'),
    })
    expect(other.updates).toEqual([])
    expect(readFileSync(file, 'utf8')).toBe(before)
    // The holder is unaffected: its session still takes prompts.
    fake.enqueue({ text: 'second answer' })
    expect(await prompt(holder, sessionId, 'still there?')).toMatchObject({ stopReason: 'end_turn' })
    other.leave()
    holder.leave()
    expect((await other.exited).code).toBe(0)
    expect((await holder.exited).code).toBe(0)
  })
})
