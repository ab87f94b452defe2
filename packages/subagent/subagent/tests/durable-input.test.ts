/**
 * Input accepted for an agent survives the process: a process that accepted a notice, a
 * report or a message is killed (SIGKILL) before the agent took it, and the next resume
 * delivers it, once. The first process is a real child process (`fixtures/accepting-parent.mjs`,
 * on the built packages); the second is this test's harness over the same session files.
 */
import { spawn } from 'node:child_process'
import { mkdtemp, readFile } from 'node:fs/promises'
import { tmpdir } from 'node:os'
import { join } from 'node:path'
import { fileURLToPath } from 'node:url'
import { afterEach, describe, expect, it, vi } from 'vitest'
import { createDelegationHarness, turnEnds, type DelegationHarness, cleanUp } from '@dsh/testkit/delegation'
import { textOf } from '@dsh/llm'
import type { Agent } from '@dsh/agent'
import { SpawnPlugin } from '@dsh/subagent-spawn'
import SubagentReportPlugin from '@dsh/tool-subagent-report'

const FIXTURE = fileURLToPath(new URL('./fixtures/accepting-parent.mjs', import.meta.url))

let harness: DelegationHarness | undefined
let dir: string | undefined
afterEach(async () => {
  await cleanUp(harness, dir)
  harness = dir = undefined
})

/**
 * Run the fixture in `mode` until it says what it accepted and `accepted(files)` holds for
 * the session files on disk, then kill it with SIGKILL: nothing of it runs after that.
 */
async function acceptThenKill(mode: 'notice' | 'message', accepted: (ids: { parent: string; child: string }) => Promise<boolean>): Promise<{ parent: string; child: string }> {
  dir = await mkdtemp(join(tmpdir(), 'dsh-durable-'))
  const child = spawn(process.execPath, [FIXTURE, dir, mode], { stdio: ['ignore', 'pipe', 'pipe'] })
  let stdout = ''
  let stderr = ''
  child.stdout.on('data', (chunk: Buffer) => (stdout += chunk.toString()))
  child.stderr.on('data', (chunk: Buffer) => (stderr += chunk.toString()))
  const exited = new Promise<NodeJS.Signals | null>((resolve) => child.once('exit', (_code, signal) => resolve(signal)))
  try {
    await vi.waitFor(() => expect(stdout, stderr).toContain('\n'), { timeout: 20_000, interval: 20 })
    const ids = JSON.parse(stdout.trim()) as { parent: string; child: string }
    await vi.waitFor(async () => expect(await accepted(ids)).toBe(true), { timeout: 10_000, interval: 20 })
    child.kill('SIGKILL')
    expect(await exited).toBe('SIGKILL')
    return ids
  } finally {
    child.kill('SIGKILL')
  }
}

const sessionFile = (id: string) => readFile(join(dir!, `${id}.jsonl`), 'utf8').catch(() => '')
const userTexts = (agent: Agent) => agent.session.ownEvents().flatMap((event) => (event.type === 'user/message' ? [textOf(event.message.content)] : []))

describe('durable input', () => {
  it('a report and a settlement notice accepted for a busy parent reach it on its next resume, once each', async () => {
    const { parent: parentId, child: childId } = await acceptThenKill('notice', async ({ parent }) => (await sessionFile(parent)).split('"input/queued"').length === 3)
    harness = await createDelegationHarness({
      // The scripted model counts the replies a session has had: the first was the held tool call.
      script: [{ when: { prompt: '^hold' }, reply: [{ text: 'unused' }, { text: 'read my notices' }, { text: 'nothing new' }] }],
      sessionDir: dir!,
      plugins: [[SpawnPlugin, {}], [SubagentReportPlugin, {}]],
    })
    const parent = await harness.ctx.agents.create({ sessionId: parentId })
    // Not woken by them: the notices join the parent's next step.
    expect(parent.status).toBe('idle')
    await parent.followup('what did the researcher say?')
    const seen = textOf(harness.requests.at(-1)!.messages.toArray().flatMap((message) => (message.role === 'user' ? message.content : [])))
    expect(seen).toContain(`Background subagent ${childId} reported:\nhalfway there`)
    expect(seen).toContain(`Subagent ${childId} finished its turn`)
    expect(seen).toContain('the research is done')
    // Taken once: the log says so, and the next turn is not told again.
    expect(parent.session.ownEvents().filter((event) => event.type === 'input/taken')).toHaveLength(1)
    await parent.followup('anything else?')
    expect(userTexts(parent).filter((text) => text.includes('halfway there'))).toHaveLength(1)
    expect(userTexts(parent).filter((text) => text.includes(`Subagent ${childId} finished its turn`))).toHaveLength(1)
  })

  it('a message accepted for a busy continuable child runs when its parent is next resumed, and the parent hears of it', async () => {
    const { parent: parentId, child: childId } = await acceptThenKill('message', async ({ child }) => (await sessionFile(child)).includes('second message: summarise'))
    harness = await createDelegationHarness({
      script: [
        // The scripted model counts the replies a session has had: the first was the held tool call.
        { when: { prompt: '^wait' }, reply: [{ text: 'unused' }, { text: 'summary: the gate never opened' }] },
        { reply: [{ text: 'parent noted it' }, { text: 'parent again' }] },
      ],
      sessionDir: dir!,
      plugins: [[SpawnPlugin, {}]],
    })
    const parent = await harness.ctx.agents.create({ sessionId: parentId })
    // The manager brings the child back and it runs what it had accepted; the parent is told.
    await vi.waitFor(() => expect(harness!.ctx.agents.get(childId)).toBeDefined(), { timeout: 5_000, interval: 10 })
    const child = harness.ctx.agents.get(childId)!
    await turnEnds(child, 2)
    expect(userTexts(child)).toEqual(['wait for the gate', 'second message: summarise what you have'])
    // The turn the kill cut short was closed as an error when the child was reopened.
    expect(child.session.ownEvents().flatMap((event) => (event.type === 'turn/end' ? [event.reason] : []))).toEqual(['error', 'completed'])
    await parent.whenIdle()
    await vi.waitFor(() => expect(userTexts(parent).some((text) => text.includes(`Subagent ${childId} finished its turn`) && text.includes('summary: the gate never opened'))).toBe(true), {
      timeout: 5_000,
      interval: 10,
    })
    // Run once: a later resume has nothing left to run.
    expect(child.session.ownEvents().filter((event) => event.type === 'input/taken').flatMap((event) => (event.type === 'input/taken' ? event.ids : []))).toHaveLength(2)
  })
})
