/**
 * The `acp` provider as a continuable child: a real `dsh acp` process (the built CLI) as
 * the agent, with its model a fake OpenAI-compatible server on 127.0.0.1 that records
 * every request, so each test reads exactly what context the child's model was given.
 */
import { existsSync, mkdtempSync, readdirSync, readFileSync, realpathSync, writeFileSync } from 'node:fs'
import { tmpdir } from 'node:os'
import { join } from 'node:path'
import { afterEach, describe, expect, it } from 'vitest'
import { text } from '@dsh/llm'
import { exists, startFakeOpenAIChat, type FakeOpenAIChat } from '@dsh/testkit'
import { DESCRIPTOR_VERSION, type ContinuableDescriptor, type PrepareContinuableRequest, type RemoteConversation, type SubagentProgress } from '@dsh/subagent'
import { AcpProvider, resolveAcpSpec, AcpProviderConfig } from '@dsh/subagent-acp'
import { dshMain, FAST, fixture, setup, type Setup } from './helpers.js'

const cleanups: Array<() => Promise<void>> = []
afterEach(async () => {
  for (const cleanup of cleanups.splice(0).reverse()) await cleanup()
})

const tempDir = (prefix: string) => realpathSync(mkdtempSync(join(tmpdir(), prefix)))

/** Live processes whose environment has `ACP_TEST_MARKER=marker` (each test gives its agents a unique one). */
function processesWith(marker: string): number[] {
  const found: number[] = []
  for (const entry of readdirSync('/proc')) {
    if (!/^\d+$/.test(entry)) continue
    try {
      if (readFileSync(`/proc/${entry}/stat`, 'utf8').split(') ')[1]?.startsWith('Z')) continue
      if (readFileSync(`/proc/${entry}/environ`, 'utf8').split('\0').includes(`ACP_TEST_MARKER=${marker}`)) found.push(Number(entry))
    } catch {
      // Gone meanwhile: not a survivor.
    }
  }
  return found
}

/** Wait until another process has written `needle` into `file`. */
async function untilFileHolds(file: string, needle: string): Promise<void> {
  while (!(existsSync(file) && readFileSync(file, 'utf8').includes(needle))) await new Promise((resolve) => setTimeout(resolve, 20))
}

interface World {
  fake: FakeOpenAIChat
  setup: Setup
  provider: AcpProvider
  /** The `--session-dir` of the child `dsh acp`. */
  sessionDir: string
  marker: string
}

/** A parent harness and an `acp` provider whose command is `dsh acp` on the fake model. */
async function world(extra: Partial<AcpProviderConfig> = {}): Promise<World> {
  const fake = await startFakeOpenAIChat()
  cleanups.push(() => fake.close())
  const dir = tempDir('acp-continuable-')
  const config = join(dir, 'dsh.yml')
  writeFileSync(config, ['- id: llm-fake', '  name: "@dsh/llm-openai"', `  config: { name: fake, baseURL: "${fake.url}", apiKeyEnv: FAKE_MODEL_AUTH, model: fake-model }`].join('\n'))
  const sessionDir = join(dir, 'sessions')
  const marker = extra.env?.ACP_TEST_MARKER ?? dir
  const providerConfig = {
    ...FAST,
    command: process.execPath,
    args: [dshMain, 'acp', '--config', config, '--model', 'fake', '--session-dir', sessionDir],
    env: { FAKE_MODEL_AUTH: 'loopback', ACP_TEST_MARKER: marker },
    ...extra,
  }
  const parentSetup = await setup(providerConfig)
  cleanups.push(() => parentSetup.harness.dispose())
  const provider = new AcpProvider('acp', resolveAcpSpec(AcpProviderConfig(providerConfig)))
  return { fake, setup: parentSetup, provider, sessionDir, marker }
}

function prepareRequest(w: World, prompt: string, signal = new AbortController().signal): PrepareContinuableRequest {
  const descriptor: ContinuableDescriptor = { version: DESCRIPTOR_VERSION, mode: 'continuable', provider: 'acp', label: 'remote helper' }
  return { childId: 'child-1', parent: w.setup.parent, descriptor, request: { prompt: [text(prompt)], parent: w.setup.parent }, signal }
}

async function open(w: World): Promise<RemoteConversation> {
  const preparation = await w.provider.prepareContinuable(prepareRequest(w, 'unused: the manager sends the first prompt'))
  if (preparation.kind !== 'remote') throw new Error('expected a remote conversation')
  cleanups.push(() => preparation.conversation.dispose())
  return preparation.conversation
}

/** The user and assistant texts of one recorded model request. */
function contextOf(request: FakeOpenAIChat['requests'][number]): string[] {
  const { messages } = request.body as { messages: Array<{ role: string; content?: unknown }> }
  return messages.filter((message) => message.role === 'user' || message.role === 'assistant').map((message) => `${message.role}: ${typeof message.content === 'string' ? message.content.trim() : ''}`)
}

const outputText = (result: { output: Array<{ text: string }> }) => result.output.map((block) => block.text).join('')

describe('acp continuable children', () => {
  it('the session stays open while the process lives: a second message is a new prompt with the first turn in context', async () => {
    const w = await world()
    const conversation = await open(w)
    const pid = conversation.pid!
    expect(exists(pid)).toBe(true)
    w.fake.enqueue({ text: 'Noted: apple.' }, { text: 'You said apple.' })
    const first = await conversation.send([text('remember apple')])
    expect(first).toMatchObject({ stopReason: 'completed' })
    expect(outputText(first)).toBe('Noted: apple.')
    const second = await conversation.send([text('what did I say?')])
    expect(outputText(second)).toBe('You said apple.')
    expect(conversation.pid).toBe(pid)
    expect(contextOf(w.fake.requests[1]!)).toEqual(['user: remember apple', 'assistant: Noted: apple.', 'user: what did I say?'])
    await conversation.dispose()
    expect(exists(pid)).toBe(false)
    // The child's own session file (flushed as it exited) records the lineage and both turns.
    const lines = readFileSync(join(w.sessionDir, `${conversation.remoteId}.jsonl`), 'utf8').trim().split('\n').map((line) => JSON.parse(line) as { type?: string })
    expect(lines[0]).toMatchObject({ header: { parentSession: w.setup.parent.id, delegationDepth: 1, provider: 'acp', label: 'remote helper' } })
    expect(lines.filter((line) => line.type === 'turn/start')).toHaveLength(2)
  })

  it('a turn reports its progress to the sink send was given, and nothing after the turn settled', async () => {
    const w = await world()
    const conversation = await open(w)
    w.fake.enqueue({ text: 'Noted: plum, and more besides.' })
    const heard: SubagentProgress[] = []
    const answer = await conversation.send([text('remember plum')], { report: (update) => void heard.push(update) })
    expect(outputText(answer)).toBe('Noted: plum, and more besides.')
    expect(heard.map((update) => (update.kind === 'text' ? update.text : '')).join('')).toBe('Noted: plum, and more besides.')
    const settled = heard.length
    w.fake.enqueue({ text: 'Quiet.' })
    // The next turn has no listener: the earlier sink hears nothing of it.
    await conversation.send([text('again')])
    expect(heard).toHaveLength(settled)
  })

  it('after the process is gone, resumeContinuable starts the agent again and session/load reopens the session with its whole history', async () => {
    const w = await world()
    const conversation = await open(w)
    w.fake.enqueue({ text: 'Noted: pear.' })
    await conversation.send([text('remember pear')])
    const { remoteId, resumeData } = conversation
    const oldPid = conversation.pid!
    await conversation.dispose()
    expect(exists(oldPid)).toBe(false)

    const resumed = await w.provider.resumeContinuable(
      { childId: 'child-1', parentId: w.setup.parent.id, depth: 1, remoteId, descriptor: prepareRequest(w, 'x').descriptor, ...(resumeData && { resumeData }) },
      new AbortController().signal,
    )
    cleanups.push(() => resumed.dispose())
    expect(resumed.pid).not.toBe(oldPid)
    w.fake.enqueue({ text: 'It was pear.' })
    const answer = await resumed.send([text('which fruit?')])
    expect(answer).toMatchObject({ stopReason: 'completed' })
    expect(outputText(answer)).toBe('It was pear.')
    expect(contextOf(w.fake.requests.at(-1)!)).toEqual(['user: remember pear', 'assistant: Noted: pear.', 'user: which fruit?'])
  })

  it('a child whose process died is started again by the next message and continues its session', async () => {
    const w = await world()
    const conversation = await open(w)
    w.fake.enqueue({ text: 'Noted: plum.' })
    await conversation.send([text('remember plum')])
    const pid = conversation.pid!
    // dsh writes a turn's events just behind it: a crash before that would lose the turn.
    await untilFileHolds(join(w.sessionDir, `${conversation.remoteId}.jsonl`), '"turn/end"')
    process.kill(pid, 'SIGKILL')
    while (exists(pid)) await new Promise((resolve) => setTimeout(resolve, 20))
    w.fake.enqueue({ text: 'Plum.' })
    const answer = await conversation.send([text('which fruit?')])
    expect(answer.diagnostic).toBeUndefined()
    expect(answer).toMatchObject({ stopReason: 'completed' })
    expect(conversation.pid).not.toBe(pid)
    expect(contextOf(w.fake.requests.at(-1)!)).toEqual(['user: remember plum', 'assistant: Noted: plum.', 'user: which fruit?'])
  })

  it('cancel stops the running turn (aborted) and leaves the conversation open for the next message', async () => {
    const w = await world()
    const conversation = await open(w)
    w.fake.enqueue({ text: 'too late', delayMs: 60_000 })
    const running = conversation.send([text('take your time')])
    while (w.fake.requests.length === 0) await new Promise((resolve) => setTimeout(resolve, 20))
    conversation.cancel('the parent\'s turn was cancelled')
    expect(await running).toMatchObject({ stopReason: 'aborted' })
    const pid = conversation.pid
    w.fake.enqueue({ text: 'Back again.' })
    expect(outputText(await conversation.send([text('next')]))).toBe('Back again.')
    expect(conversation.pid).toBe(pid)
  })

  it('an agent that does not advertise loadSession is UNSUPPORTED_CAPABILITY, and its process is gone before the rejection', async () => {
    const marker = tempDir('acp-no-load-')
    const w = await world({ command: process.execPath, args: [fixture('agent.mjs')], env: { ACP_TEST_MARKER: marker } })
    await expect(w.provider.prepareContinuable(prepareRequest(w, 'x'))).rejects.toMatchObject({
      code: 'UNSUPPORTED_CAPABILITY',
      message: expect.stringContaining('does not advertise loadSession'),
    })
    expect(processesWith(marker)).toEqual([])
  })

  it('resuming an unknown remote session fails with the agent\'s not-found error and leaves no process', async () => {
    const w = await world()
    const cwd = w.setup.parent.session.header.cwd
    const error = await w.provider
      .resumeContinuable({ childId: 'child-x', parentId: w.setup.parent.id, depth: 1, remoteId: 'no-such-session', descriptor: prepareRequest(w, 'x').descriptor, resumeData: { cwd } }, new AbortController().signal)
      .catch((rejection: unknown) => rejection)
    expect(error).toMatchObject({ code: 'START_FAILED', message: expect.stringMatching(/stage session\/load: .*Resource not found: no stored dsh session no-such-session/) })
    expect(processesWith(w.marker)).toEqual([])
  })

  it('a child whose process cannot be started again settles the message as an error, with nothing left running', async () => {
    const w = await world()
    const conversation = await open(w)
    w.fake.enqueue({ text: 'Noted.' })
    await conversation.send([text('remember')])
    const { remoteId, resumeData } = conversation
    await conversation.dispose()
    // The same record, but the agent program is gone now.
    const broken = new AcpProvider('acp', resolveAcpSpec(AcpProviderConfig({ ...FAST, command: join(tempDir('acp-gone-'), 'no-such-agent') })))
    await expect(
      broken.resumeContinuable({ childId: 'child-1', parentId: w.setup.parent.id, depth: 1, remoteId, descriptor: prepareRequest(w, 'x').descriptor, ...(resumeData && { resumeData }) }, new AbortController().signal),
    ).rejects.toMatchObject({ code: 'START_FAILED', message: expect.stringContaining('stage spawn') })
    // And a conversation that loses its process, then cannot restart it, answers error.
    const again = await open(w)
    w.fake.enqueue({ text: 'ok' })
    await again.send([text('hello')])
    const pid = again.pid!
    await untilFileHolds(join(w.sessionDir, `${again.remoteId}.jsonl`), '"turn/end"')
    writeFileSync(join(w.sessionDir, `${again.remoteId}.jsonl`), 'corrupted\n')
    process.kill(pid, 'SIGKILL')
    while (exists(pid)) await new Promise((resolve) => setTimeout(resolve, 20))
    const answer = await again.send([text('still there?')])
    expect(answer).toMatchObject({ stopReason: 'error', diagnostic: expect.stringContaining(`could not be started again to continue ACP session ${again.remoteId}`) })
    expect(processesWith(w.marker)).toEqual([])
  })

  it('an aborted signal during the start rejects ABORTED and reaps the agent', async () => {
    const w = await world()
    const controller = new AbortController()
    const starting = w.provider.prepareContinuable(prepareRequest(w, 'x', controller.signal))
    while (processesWith(w.marker).length === 0) await new Promise((resolve) => setTimeout(resolve, 10))
    controller.abort(new Error('the parent gave up'))
    await expect(starting).rejects.toMatchObject({ code: 'ABORTED' })
    expect(processesWith(w.marker)).toEqual([])
  })

  it('a message over maxFrameBytes ends its turn error naming the limit without reaching the agent, and the next message is answered', async () => {
    const w = await world({ maxFrameBytes: 4096 })
    const conversation = await open(w)
    const pid = conversation.pid!
    const refused = await conversation.send([text('z'.repeat(5000))])
    expect(refused).toMatchObject({ stopReason: 'error', diagnostic: expect.stringContaining('over the 4096-byte frame limit (maxFrameBytes)') })
    expect(w.fake.requests).toHaveLength(0)
    w.fake.enqueue({ text: 'small is fine' })
    expect(outputText(await conversation.send([text('a short one')]))).toBe('small is fine')
    expect(conversation.pid).toBe(pid)
  })

  it('an update over maxFrameBytes ends the turn error naming the limit and stops the agent', async () => {
    const marker = tempDir('acp-huge-')
    const w = await world({ args: [fixture('agent.mjs'), 'huge'], maxFrameBytes: 65_536, env: { ACP_TEST_MARKER: marker } })
    const conversation = await open(w)
    const first = conversation.pid!
    const answer = await conversation.send([text('200000')])
    expect(answer).toMatchObject({ stopReason: 'error', diagnostic: expect.stringContaining('over the 65536-byte frame limit (maxFrameBytes)') })
    expect(outputText(answer)).toBe('partial ')
    // The agent is stopped (the next message would start it again with session/load).
    while (exists(first)) await new Promise((resolve) => setTimeout(resolve, 20))
    expect(processesWith(marker)).toEqual([])
  })
})
