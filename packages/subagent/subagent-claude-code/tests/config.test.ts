import { afterEach, describe, expect, it } from 'vitest'
import { createHarness, type Harness } from '@dsh/testkit/harness'
import { NO_CAPABILITIES, SubagentService } from '@dsh/subagent'
import { ClaudeCodePlugin, platformPackages, resolveClaudeExecutable } from '../src/index.js'

let harness: Harness | undefined
afterEach(async () => {
  await harness?.dispose()
  harness = undefined
})

describe('claude-code config and registration', () => {
  it('defaults: providerName claude-code, ask, no timeout, every capability but a workspace of its own false, not local', async () => {
    expect(ClaudeCodePlugin.Config({})).toEqual({ providerName: 'claude-code', env: {}, passEnv: [], permissionMode: 'ask', startTimeoutMs: 60_000, graceMs: 2_000 })
    harness = await createHarness()
    await harness.plugin(SubagentService)
    await harness.plugin(ClaudeCodePlugin, { providerName: 'cc' })
    const provider = harness.ctx.subagents.getProvider('cc')!
    expect(provider.capabilities).toEqual({ ...NO_CAPABILITIES, workspace: true })
    expect(provider.inheritsParentContext).toBe(false)
  })

  it('invalid config fails naming the key', () => {
    expect(() => ClaudeCodePlugin.Config({ permissionMode: 'yolo' })).toThrow(/permissionMode/)
    expect(() => ClaudeCodePlugin.Config({ env: { A: 1 } })).toThrow(/env\.A/)
    expect(() => ClaudeCodePlugin.Config({ timeoutMs: -5 })).toThrow(/timeoutMs/)
    expect(() => ClaudeCodePlugin.Config({ env: { 'HOME=/tmp': 'x' } })).toThrow(/env/)
    expect(() => ClaudeCodePlugin.Config({ passEnv: [''] })).toThrow(/passEnv/)
    expect(() => ClaudeCodePlugin.Config({ cwd: '' })).toThrow(/cwd/)
    expect(() => ClaudeCodePlugin.Config({ model: '' })).toThrow(/model/)
    expect(() => ClaudeCodePlugin.Config({ executable: '' })).toThrow(/executable/)
  })

  it('a configured executable that does not exist fails at load, naming the key', async () => {
    harness = await createHarness()
    await harness.plugin(SubagentService)
    await expect(harness.plugin(ClaudeCodePlugin, { executable: '/nowhere/claude' })).rejects.toThrow(/`executable`/)
    expect(harness.ctx.subagents.list()).toEqual([])
  })

  it('the binary comes from the SDK\'s platform package, never PATH', () => {
    expect(resolveClaudeExecutable()).toMatch(/node_modules\/@anthropic-ai\/claude-agent-sdk-linux-x64(-musl)?\/claude$/)
    expect(platformPackages('linux', 'x64', false)).toEqual(['@anthropic-ai/claude-agent-sdk-linux-x64', '@anthropic-ai/claude-agent-sdk-linux-x64-musl'])
    expect(platformPackages('darwin', 'arm64')).toEqual(['@anthropic-ai/claude-agent-sdk-darwin-arm64'])
  })
})
