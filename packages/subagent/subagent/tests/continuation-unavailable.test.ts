import { mkdtemp, readdir, rm } from 'node:fs/promises'
import { tmpdir } from 'node:os'
import { join } from 'node:path'
import { Context } from 'cordis'
import { afterEach, describe, expect, it } from 'vitest'
import { createHarness, type Harness } from '@dsh/testkit/harness'
import { text } from '@dsh/llm'
import { SessionStore } from '@dsh/session'
import SessionJsonl from '@dsh/session-jsonl'
import { NO_CAPABILITIES, SubagentService, type SubagentProvider, type SubagentRun } from '@dsh/subagent'

let harness: Harness | undefined
let bare: Context | undefined
let dir: string | undefined
afterEach(async () => {
  await bare?.fiber.dispose()
  await harness?.dispose()
  if (dir) await rm(dir, { recursive: true, force: true })
  harness = bare = dir = undefined
})

/** A provider that answers one-shot runs at once and records whether it was asked to continue. */
class EchoProvider implements SubagentProvider {
  readonly name = 'echo'
  readonly capabilities = NO_CAPABILITIES
  readonly inheritsParentContext = false
  prepared = 0
  async start(): Promise<SubagentRun> {
    return { id: 'echo-1', local: false, result: Promise.resolve({ output: [text('echoed')], stopReason: 'completed' }), cancel: () => {}, dispose: async () => {} }
  }
  async prepareContinuable(): Promise<never> {
    this.prepared++
    throw new Error('never reached without ctx.agents')
  }
}

describe('ctx.subagents without ctx.agents', () => {
  it('starts, serves one-shot delegation, and refuses continuation with CONTINUATION_UNAVAILABLE before the provider is asked', async () => {
    // The parent is a real agent of another composition; this one has sessions and storage but no agents.
    harness = await createHarness({ script: [{ reply: [{ text: 'hi' }] }] })
    const parent = await harness.agent()
    dir = await mkdtemp(join(tmpdir(), 'dsh-no-agents-'))
    bare = new Context()
    await bare.plugin(SessionStore)
    await bare.plugin(SessionJsonl, { dir })
    await bare.plugin(SubagentService)
    expect(bare.get('agents')).toBeUndefined()
    const subagents = bare.get('subagents')
    expect(subagents).toBeDefined()
    const provider = new EchoProvider()
    subagents!.registerProvider(provider)

    const run = await subagents!.start('echo', { prompt: [text('say it')], parent, signal: new AbortController().signal })
    expect(await run.result).toEqual({ output: [text('echoed')], stopReason: 'completed' })

    await expect(subagents!.startContinuable({ provider: 'echo', label: 'kept', request: { prompt: [text('keep going')], parent }, signal: new AbortController().signal }))
      .rejects.toMatchObject({ code: 'CONTINUATION_UNAVAILABLE', message: expect.stringContaining('ctx.agents') })
    expect(provider.prepared).toBe(0)
    expect(await readdir(dir)).toEqual([])
  })
})
