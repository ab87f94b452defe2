/**
 * The provider as a continuable child, against the real Claude Code binary and the fake
 * Messages API: each message resumes the same Claude Code session, so the model sees the
 * earlier turns, in this process and from a record after a restart.
 */
import { existsSync, readdirSync } from 'node:fs'
import { join } from 'node:path'
import { afterEach, describe, expect, it } from 'vitest'
import { text } from '@dsh/llm'
import { DESCRIPTOR_VERSION, type ContinuableDescriptor, type RemoteConversation } from '@dsh/subagent'
import type { ApprovalRequestInfo } from '@dsh/approvals'
import { ClaudeCodeProvider, type PermissionModeSetting } from '../src/index.js'
import { gone, offlineEnv, realBinary, setup, type Fixture } from './fixture.js'

/** The result message's usage, as the fake counts it (estimated from the request's size). */
const reportedUsage = { inputTokens: expect.any(Number), outputTokens: expect.any(Number), cachedInputTokens: 0 }

let fixture: Fixture | undefined
const conversations: RemoteConversation[] = []
afterEach(async () => {
  for (const conversation of conversations.splice(0)) await conversation.dispose()
  await fixture?.dispose()
  fixture = undefined
})

const descriptor: ContinuableDescriptor = { version: DESCRIPTOR_VERSION, mode: 'continuable', provider: 'claude-code', label: 'remote helper' }

/** A provider configured as the fixture's plugin is, finding parents among the harness's live agents (and its broker, when one is composed). */
function provider(f: Fixture, permissionMode: PermissionModeSetting = 'deny'): ClaudeCodeProvider {
  return new ClaudeCodeProvider(
    { providerName: 'claude-code', env: offlineEnv(f.fake, f.home), passEnv: [], permissionMode, startTimeoutMs: 60_000, graceMs: 500, executable: realBinary, approvals: () => f.harness.ctx.get('approvals') },
    (id) => f.harness.ctx.agents.get(id),
  )
}

async function open(f: Fixture, permissionMode?: PermissionModeSetting): Promise<RemoteConversation> {
  const preparation = await provider(f, permissionMode).prepareContinuable({ childId: 'child-1', parent: f.parent, descriptor, request: { prompt: [text('first')], parent: f.parent }, signal: new AbortController().signal })
  if (preparation.kind !== 'remote') throw new Error('expected a remote conversation')
  conversations.push(preparation.conversation)
  return preparation.conversation
}

/** The text of every user and assistant message the model was sent in request `n`. */
function contextOf(f: Fixture, n: number): string {
  return JSON.stringify((f.fake.messageRequests[n]!.body as { messages: unknown[] }).messages)
}

const outputText = (result: { output: Array<{ text: string }> }) => result.output.map((block) => block.text).join('')

describe('claude-code continuable children', () => {
  it('each message resumes the same Claude Code session: the second turn sees the first, and nothing runs between turns', async () => {
    fixture = await setup([{ text: 'Noted: apple.' }, { text: 'You said apple.' }])
    const conversation = await open(fixture)
    expect(conversation.pid).toBeUndefined()
    const first = await conversation.send([text('remember apple')])
    expect(first).toEqual({ output: [text('Noted: apple.')], stopReason: 'completed', usage: reportedUsage })
    const second = await conversation.send([text('what did I say?')])
    expect(outputText(second)).toBe('You said apple.')
    expect(contextOf(fixture, 1)).toContain('remember apple')
    expect(contextOf(fixture, 1)).toContain('Noted: apple.')
    // The transcript is persisted under CLAUDE_CONFIG_DIR, named by the conversation's id.
    const projects = join(fixture.home, '.claude', 'projects')
    const transcripts = existsSync(projects) ? readdirSync(projects, { recursive: true }).map(String).filter((name) => name.endsWith(`${conversation.remoteId}.jsonl`)) : []
    expect(transcripts).toHaveLength(1)
  })

  it('resumeContinuable continues the session from its record, as after a restart', async () => {
    fixture = await setup([{ text: 'Noted: pear.' }, { text: 'It was pear.' }])
    const conversation = await open(fixture)
    await conversation.send([text('remember pear')])
    await conversation.dispose()
    const resumed = await provider(fixture).resumeContinuable(
      { childId: 'child-1', parentId: fixture.parent.id, depth: 1, remoteId: conversation.remoteId, descriptor },
      new AbortController().signal,
    )
    conversations.push(resumed)
    const answer = await resumed.send([text('which fruit?')])
    expect(outputText(answer)).toBe('It was pear.')
    expect(contextOf(fixture, 1)).toContain('remember pear')
    expect(contextOf(fixture, 1)).toContain('Noted: pear.')
  })

  it('cancel ends the running turn aborted, stops its process, and the next message continues the session', async () => {
    fixture = await setup([{ text: 'Noted: plum.' }, { text: 'too late', delayMs: 60_000 }, { text: 'Plum.' }])
    const conversation = await open(fixture)
    await conversation.send([text('remember plum')])
    const running = conversation.send([text('take your time')])
    while (fixture.fake.messageRequests.length < 2) await new Promise((resolve) => setTimeout(resolve, 20))
    const pid = conversation.pid!
    conversation.cancel()
    expect(await running).toMatchObject({ stopReason: 'aborted' })
    expect(gone(pid)).toBe(true)
    const answer = await conversation.send([text('which fruit?')])
    expect(outputText(answer)).toBe('Plum.')
    expect(contextOf(fixture, 2)).toContain('remember plum')
  })

  it('in ask mode its permission asks go to the parent\'s broker naming the child by its record id, also after a resume', async () => {
    fixture = await setup([], {}, {}, {})
    const [first, second] = [join(fixture.workDir, 'first'), join(fixture.workDir, 'second')]
    const touch = (path: string) => ({ toolUses: [{ name: 'Bash', input: { command: `touch ${path}`, description: 'make it' } }] })
    fixture.fake.enqueue(touch(first), { text: 'First made.' }, touch(second), { text: 'Second made.' })
    const asked: ApprovalRequestInfo[] = []
    fixture.harness.ctx.approvals.addFrontEnd({
      name: 'the test',
      ask: async (request) => {
        asked.push(request)
        return { decision: 'allow-once', by: 'the test' }
      },
    })
    const conversation = await open(fixture, 'ask')
    expect(outputText(await conversation.send([text('make the first')]))).toBe('First made.')
    await conversation.dispose()
    const resumed = await provider(fixture, 'ask').resumeContinuable({ childId: 'child-1', parentId: fixture.parent.id, depth: 1, remoteId: conversation.remoteId, descriptor }, new AbortController().signal)
    conversations.push(resumed)
    expect(outputText(await resumed.send([text('make the second')]))).toBe('Second made.')
    expect(asked.map((request) => [request.subject, request.child, request.path])).toEqual([
      [`touch ${first}`, 'child-1', ['dsh test', 'claude-code "remote helper"']],
      [`touch ${second}`, 'child-1', ['dsh test', 'claude-code "remote helper"']],
    ])
    expect([existsSync(first), existsSync(second)]).toEqual([true, true])
  })

  it('a record whose session id is not a Claude Code id is refused; a message for a parent that is not live fails clearly', async () => {
    fixture = await setup([])
    await expect(provider(fixture).resumeContinuable({ childId: 'child-x', parentId: fixture.parent.id, depth: 1, remoteId: '../etc', descriptor }, new AbortController().signal)).rejects.toMatchObject({
      code: 'INVALID_REQUEST',
      message: expect.stringContaining('not a Claude Code session id'),
    })
    const orphan = await provider(fixture).resumeContinuable(
      { childId: 'child-y', parentId: 'no-such-parent', depth: 1, remoteId: '00000000-0000-4000-8000-000000000000', descriptor },
      new AbortController().signal,
    )
    conversations.push(orphan)
    expect(await orphan.send([text('hello')])).toMatchObject({ stopReason: 'error', diagnostic: expect.stringContaining('parent agent no-such-parent') })
    expect(fixture.fake.messageRequests).toHaveLength(0)
  })
})
