/**
 * The provider as a continuable child, against the real pinned `codex app-server` and
 * the fake Responses server: one non-ephemeral thread across turns, and `thread/resume`
 * in a new app-server after the old one is gone.
 */
import { existsSync, mkdtempSync } from 'node:fs'
import { tmpdir } from 'node:os'
import { join } from 'node:path'
import { afterEach, describe, expect, it } from 'vitest'
import { text } from '@dsh/llm'
import type { Agent } from '@dsh/agent'
import { DESCRIPTOR_VERSION, type ContinuableDescriptor, type RemoteConversation, type SubagentProgress } from '@dsh/subagent'
import { startFakeOpenAIResponses, type FakeOpenAIResponses, type FakeResponsesAnswer } from '@dsh/testkit'
import { createHarness, type Harness } from '@dsh/testkit/harness'
import { ApprovalService, type ApprovalRequestInfo } from '@dsh/approvals'
import { CodexConfig, CodexProvider } from '../src/index.js'
import { appServerPids, codexHome, exists, waitFor } from './helpers.js'

let harness: Harness | undefined
let fake: FakeOpenAIResponses | undefined
const conversations: RemoteConversation[] = []
afterEach(async () => {
  for (const conversation of conversations.splice(0)) await conversation.dispose()
  await harness?.dispose()
  await fake?.close()
  harness = undefined
  fake = undefined
})

const descriptor: ContinuableDescriptor = { version: DESCRIPTOR_VERSION, mode: 'continuable', provider: 'codex', label: 'remote helper' }

/** With `withBroker`, the approval broker is composed and handed to the provider as the plugin does. */
async function setup(answers: FakeResponsesAnswer[], withBroker = false): Promise<{ provider: CodexProvider; parent: Agent }> {
  fake = await startFakeOpenAIResponses(answers)
  const home = codexHome(fake.url)
  harness = await createHarness()
  if (withBroker) await harness.plugin(ApprovalService)
  const parent = await harness.agent({ meta: { cwd: mkdtempSync(join(tmpdir(), 'dsh-codex-work-')) } })
  const { ctx } = harness
  const provider = new CodexProvider(CodexConfig({ env: { CODEX_HOME: home, HOME: home, FAKE_CODEX_API_KEY: 'sk-fake' }, graceMs: 500 }), undefined, {
    approvals: () => ctx.get('approvals'),
    agent: (id) => ctx.get('agents')?.get(id),
  })
  return { provider, parent }
}

async function open(provider: CodexProvider, parent: Agent): Promise<RemoteConversation> {
  const preparation = await provider.prepareContinuable({ childId: 'child-1', parent, descriptor, request: { prompt: [text('first')], parent }, signal: new AbortController().signal })
  if (preparation.kind !== 'remote') throw new Error('expected a remote conversation')
  conversations.push(preparation.conversation)
  return preparation.conversation
}

const inputOf = (n: number) => JSON.stringify((fake!.requests[n]!.body as { input: unknown }).input)
const outputText = (result: { output: Array<{ text: string }> }) => result.output.map((block) => block.text).join('')

describe('codex continuable children', () => {
  it('one thread across turns in one app-server: the second turn sees the first', async () => {
    const { provider, parent } = await setup([{ text: 'Noted: apple.' }, { text: 'You said apple.' }])
    const conversation = await open(provider, parent)
    const pid = conversation.pid!
    expect(exists(pid)).toBe(true)
    expect(outputText(await conversation.send([text('remember apple')]))).toBe('Noted: apple.')
    const second = await conversation.send([text('what did I say?')])
    expect(second).toMatchObject({ stopReason: 'completed' })
    expect(outputText(second)).toBe('You said apple.')
    expect(conversation.pid).toBe(pid)
    expect(inputOf(fake!.requests.length - 1)).toContain('remember apple')
    expect(inputOf(fake!.requests.length - 1)).toContain('Noted: apple.')
    await conversation.dispose()
    expect(exists(pid)).toBe(false)
  })

  it('a turn reports its text and usage to the sink send was given, and its result carries the turn\'s usage', async () => {
    const { provider, parent } = await setup([{ text: 'Noted: plum.', usage: { inputTokens: 40, outputTokens: 5 } }])
    const conversation = await open(provider, parent)
    const heard: SubagentProgress[] = []
    const answer = await conversation.send([text('remember plum')], { report: (update) => void heard.push(update) })
    expect(answer).toMatchObject({ stopReason: 'completed', usage: { inputTokens: 40, outputTokens: 5, cachedInputTokens: 0 } })
    expect(heard.map((update) => (update.kind === 'text' ? update.text : '')).join('')).toBe('Noted: plum.')
    expect(heard.at(-1)).toEqual({ kind: 'usage', usage: answer.usage })
  })

  it('resumeContinuable starts a new app-server and thread/resume continues the thread with its history', async () => {
    const { provider, parent } = await setup([{ text: 'Noted: pear.' }, { text: 'It was pear.' }])
    const conversation = await open(provider, parent)
    await conversation.send([text('remember pear')])
    const { remoteId, resumeData } = conversation
    const oldPid = conversation.pid!
    await conversation.dispose()
    const resumed = await provider.resumeContinuable({ childId: 'child-1', parentId: parent.id, depth: 1, remoteId, descriptor, ...(resumeData && { resumeData }) }, new AbortController().signal)
    conversations.push(resumed)
    expect(resumed.pid).not.toBe(oldPid)
    const answer = await resumed.send([text('which fruit?')])
    expect(outputText(answer)).toBe('It was pear.')
    expect(inputOf(fake!.requests.length - 1)).toContain('remember pear')
    expect(inputOf(fake!.requests.length - 1)).toContain('Noted: pear.')
  })

  it('cancel interrupts the running turn (aborted); the thread takes the next message', async () => {
    const { provider, parent } = await setup([{ text: 'too late', delayMs: 60_000 }, { text: 'Back again.' }])
    const conversation = await open(provider, parent)
    const running = conversation.send([text('take your time')])
    await waitFor(() => fake!.requests.length > 0, 'the first model request')
    conversation.cancel()
    expect(await running).toMatchObject({ stopReason: 'aborted' })
    expect(outputText(await conversation.send([text('next')]))).toBe('Back again.')
  })

  it('its approvals go to the parent\'s broker naming the child by its record id, also after a resume in a new app-server', async () => {
    const command = (cmd: string, callId: string): FakeResponsesAnswer => ({ toolCalls: [{ callId, name: 'exec_command', arguments: { cmd } }] })
    const { provider, parent } = await setup([command('touch first.txt', 'call_1'), { text: 'first done' }, command('touch second.txt', 'call_2'), { text: 'second done' }], true)
    const asked: ApprovalRequestInfo[] = []
    harness!.ctx.approvals.addFrontEnd({
      name: 'the test',
      ask: async (request) => {
        asked.push(request)
        return { decision: 'allow-once', by: 'the test' }
      },
    })
    const conversation = await open(provider, parent)
    expect(outputText(await conversation.send([text('make the first')]))).toBe('first done')
    const { remoteId, resumeData } = conversation
    await conversation.dispose()
    const resumed = await provider.resumeContinuable({ childId: 'child-1', parentId: parent.id, depth: 1, remoteId, descriptor, ...(resumeData && { resumeData }) }, new AbortController().signal)
    conversations.push(resumed)
    expect(outputText(await resumed.send([text('make the second')]))).toBe('second done')
    expect(asked.map((request) => [request.subject, request.child, request.path])).toEqual([
      ['touch first.txt', 'child-1', ['dsh test', 'codex "remote helper"']],
      ['touch second.txt', 'child-1', ['dsh test', 'codex "remote helper"']],
    ])
    const cwd = parent.session.header.cwd
    expect([existsSync(join(cwd, 'first.txt')), existsSync(join(cwd, 'second.txt'))]).toEqual([true, true])
  })

  it('an unknown thread cannot be resumed: START_FAILED at thread/resume, and no app-server is left', async () => {
    const { provider, parent } = await setup([])
    const error = await provider
      .resumeContinuable({ childId: 'child-x', parentId: parent.id, depth: 1, remoteId: '01a22e14-cdf3-7bd3-bb6c-42136ad53d59', descriptor, resumeData: { cwd: parent.session.header.cwd } }, new AbortController().signal)
      .catch((rejection: unknown) => rejection)
    expect(error).toMatchObject({ code: 'START_FAILED', message: expect.stringMatching(/^the codex app-server refused thread\/resume: /) })
    expect(appServerPids()).toEqual([])
    await expect(provider.resumeContinuable({ childId: 'child-y', parentId: parent.id, depth: 1, remoteId: 'x', descriptor }, new AbortController().signal)).rejects.toMatchObject({ code: 'INVALID_REQUEST' })
  })
})
