/**
 * One capability check: what the subagent tool refuses to mount, what the helper tool
 * refuses to offer and what `ctx.subagents` refuses to start are decided by the same
 * function (`@dsh/subagent`'s `firstUnsupportedFeature`), so the three never disagree.
 * Each case: a provider lacking exactly one capability refuses it at every door, and one
 * with it refuses it at none.
 */
import { afterEach, describe, expect, it } from 'vitest'
import type { Context } from 'cordis'
import { createHarness, type Harness } from '@dsh/testkit/harness'
import { text } from '@dsh/llm'
import type { AgentDefinition } from '@dsh/agent-definitions'
import { NO_CAPABILITIES, SubagentService, type SubagentCapabilities, type SubagentProvider, type SubagentRequest } from '@dsh/subagent'
import { helperUnavailable, subagentToolMountProblem } from '@dsh/tool-subagent'

let harness: Harness | undefined
afterEach(async () => {
  await harness?.dispose()
  harness = undefined
})

/** A provider named `name` with only `capabilities`, answering at once. */
function provider(name: string, capabilities: Partial<SubagentCapabilities>): SubagentProvider {
  return {
    name,
    capabilities: { ...NO_CAPABILITIES, ...capabilities },
    inheritsParentContext: false,
    start: async () => ({ id: `${name}:1`, local: false, result: Promise.resolve({ output: [{ type: 'text', text: 'ok' }], stopReason: 'completed' }), cancel: () => {}, dispose: async () => {} }),
  }
}

/** Whether `ctx.subagents` starts `asked` on a provider with `capabilities`: undefined, or the refusal's code and message. */
async function startRefusal(capabilities: Partial<SubagentCapabilities>, asked: Partial<SubagentRequest>): Promise<string | undefined> {
  harness = await createHarness()
  await harness.plugin(SubagentService)
  const registered = provider('p', capabilities)
  await harness.ctx.plugin({ inject: ['subagents'], apply: (ctx: Context) => void ctx.subagents.registerProvider(registered) })
  const parent = await harness.agent()
  try {
    const run = await harness.ctx.subagents.start('p', { prompt: [text('go')], parent, signal: new AbortController().signal, ...asked })
    await run.dispose()
    return undefined
  } catch (error) {
    return `${(error as { code?: string }).code}: ${(error as Error).message}`
  } finally {
    await harness.dispose()
    harness = undefined
  }
}

const mountCode = (capabilities: Partial<SubagentCapabilities>, config: { maxDepth?: number; workspace?: 'worktree'; sandbox?: true }) =>
  subagentToolMountProblem({ provider: 'p', toolName: 'subagent', backgroundMode: 'one-shot', ...config }, provider('p', capabilities))?.code

const helper = (fields: Partial<AgentDefinition>) => ({ name: 'h', provider: 'p', instructions: '', ...fields }) as AgentDefinition

describe('one capability check', () => {
  it.each([
    ['depthLimit', { maxDepth: 2 }, 'DEPTH_UNSUPPORTED'],
    ['workspace', { workspace: 'worktree' as const }, 'UNSUPPORTED_CAPABILITY'],
    ['sandbox', { sandbox: true as const }, 'UNSUPPORTED_CAPABILITY'],
  ])("the tool's config asking for %s: refused at mount exactly where ctx.subagents refuses the request", async (feature, asked, code) => {
    expect(mountCode({}, asked)).toBe(code)
    expect(await startRefusal({}, asked)).toBe(`UNSUPPORTED_CAPABILITY: subagent provider "p" does not support ${feature}; drop it from the request or use a provider that does`)
    expect(mountCode({ [feature]: true }, asked)).toBeUndefined()
    // Past the capability check the request may still be refused for what it needs besides (a workspace service): never for the capability.
    expect(await startRefusal({ [feature]: true }, asked) ?? '').not.toMatch(/does not support/)
  })

  it.each([
    ['toolFilter', { tools: ['read'] }, { toolFilter: { allow: ['read'] } }, 'cannot enforce a tool list'],
    ['depthLimit', { maxDepth: 1 }, { maxDepth: 1 }, 'cannot enforce a depth limit'],
  ])('a helper asking for %s: not offered exactly where ctx.subagents refuses its request', async (feature, fields, asked, words) => {
    expect(helperUnavailable(helper(fields), provider('p', {}))).toBe(`provider "p" ${words}`)
    expect(await startRefusal({}, asked)).toBe(`UNSUPPORTED_CAPABILITY: subagent provider "p" does not support ${feature}; drop it from the request or use a provider that does`)
    expect(helperUnavailable(helper(fields), provider('p', { [feature]: true }))).toBeUndefined()
    expect(await startRefusal({ [feature]: true }, asked)).toBeUndefined()
  })
})
