/**
 * A confined agent's children are confined too: a sandboxed parent (its session header has
 * `sandbox`) cannot delegate to a provider that cannot confine its child's commands,
 * whether or not the request itself asks for a sandbox, through `ctx.subagents` and through
 * the model-facing tool. A provider that would start such a child is never asked.
 */
import { afterEach, describe, expect, it } from 'vitest'
import { createDelegationHarness, cleanUp, type DelegationHarness } from '@dsh/testkit/delegation'
import { text } from '@dsh/llm'
import type { Agent } from '@dsh/agent'
import { NO_CAPABILITIES, type SubagentProvider, type SubagentRequest } from '@dsh/subagent'
import SubagentToolPlugin from '@dsh/tool-subagent'

let harness: DelegationHarness | undefined
afterEach(async () => {
  await cleanUp(harness)
  harness = undefined
})

/** A provider that records what it was asked to start and finishes each child at once. */
function provider(name: string, sandbox: boolean) {
  const started: SubagentRequest[] = []
  const registered: SubagentProvider = {
    name,
    capabilities: { ...NO_CAPABILITIES, sandbox },
    inheritsParentContext: false,
    async start(request) {
      started.push(request)
      return { id: `${name}-child-${started.length}`, local: false, result: Promise.resolve({ output: [text('child done')], stopReason: 'end_turn' }), cancel: () => undefined, dispose: async () => {} }
    },
  }
  return { registered, started }
}

const confined = { sandbox: { network: false } }
const ask = (parent: Agent, extra: Partial<SubagentRequest> = {}): SubagentRequest => ({ prompt: [text('do it')], parent, signal: new AbortController().signal, ...extra })

describe('a sandboxed parent and a provider that cannot confine', () => {
  it('ctx.subagents refuses the delegation, although the request does not ask for a sandbox, and the provider is never asked', async () => {
    harness = await createDelegationHarness({ sessionDir: false })
    const remote = provider('remote', false)
    const inProcess = provider('confining', true)
    harness.ctx.subagents.registerProvider(remote.registered)
    harness.ctx.subagents.registerProvider(inProcess.registered)
    const parent = await harness.agent({ meta: confined })
    await expect(harness.ctx.subagents.start('remote', ask(parent))).rejects.toMatchObject({ code: 'UNSUPPORTED_CAPABILITY', message: 'subagent provider "remote" does not support sandbox; drop it from the request or use a provider that does' })
    expect(remote.started).toHaveLength(0)
    // A provider that confines its children is asked; an unconfined parent may use the other.
    await harness.ctx.subagents.start('confining', ask(parent))
    expect(inProcess.started).toHaveLength(1)
    const free = await harness.agent()
    await harness.ctx.subagents.start('remote', ask(free))
    expect(remote.started).toHaveLength(1)
  })

  it("the model-facing subagent tool's call fails with the refusal, and the provider is never asked", async () => {
    harness = await createDelegationHarness({
      sessionDir: false,
      script: [{ reply: [{ call: { tool: 'subagent', args: { description: 'a task', prompt: 'do it' } } }, { text: 'done' }] }],
    })
    const remote = provider('remote', false)
    harness.ctx.subagents.registerProvider(remote.registered)
    await harness.plugin(SubagentToolPlugin, { provider: 'remote' })
    const parent = await harness.agent({ meta: confined })
    await parent.followup('go')
    const results = parent.session.ownEvents().flatMap((event) => (event.type === 'tool/result' ? [event] : []))
    expect(results.map((event) => event.result)).toEqual([expect.objectContaining({ isError: true, content: [{ type: 'text', text: expect.stringContaining('subagent provider "remote" does not support sandbox') }] })])
    expect(remote.started).toHaveLength(0)
  })
})
