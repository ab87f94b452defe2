/**
 * Approval requests the real app-server will not produce on demand, against the stand-in
 * (`fixtures/fake-app-server.mjs`) with the real broker: malformed ones, and one Codex
 * clears itself while the broker still waits for an answer.
 */
import { existsSync, mkdtempSync, writeFileSync } from 'node:fs'
import { tmpdir } from 'node:os'
import { join } from 'node:path'
import { fileURLToPath } from 'node:url'
import { afterEach, describe, expect, it } from 'vitest'
import { outputText, SubagentService, type SubagentRun } from '@dsh/subagent'
import { ApprovalService, type ApprovalRequestInfo } from '@dsh/approvals'
import { text } from '@dsh/llm'
import { createHarness, type Harness } from '@dsh/testkit/harness'
import { CodexConfig, CodexProvider } from '../src/index.js'

const fakeServer = fileURLToPath(new URL('./fixtures/fake-app-server.mjs', import.meta.url))

let harness: Harness | undefined
const runs: SubagentRun[] = []

afterEach(async () => {
  await Promise.all(runs.splice(0).map((run) => run.dispose()))
  await harness?.dispose()
  harness = undefined
})

async function run(args: string[], ask: (request: ApprovalRequestInfo, signal: AbortSignal) => Promise<never> | never): Promise<{ run: SubagentRun; asked: ApprovalRequestInfo[] }> {
  harness = await createHarness()
  await harness.plugin(ApprovalService)
  await harness.plugin(SubagentService)
  const approvals = harness.ctx.approvals
  harness.ctx.subagents.registerProvider(new CodexProvider(CodexConfig({ graceMs: 200 }), { command: process.execPath, args: [fakeServer, ...args], version: 'fake' }, { approvals: () => approvals }))
  const asked: ApprovalRequestInfo[] = []
  approvals.addFrontEnd({
    name: 'the test',
    ask: async (request, signal) => {
      asked.push(request)
      return ask(request, signal)
    },
  })
  const parent = await harness.agent()
  const started = await harness.ctx.subagents.start('codex', { prompt: [text('hi')], parent, signal: new AbortController().signal })
  runs.push(started)
  return { run: started, asked }
}

describe('codex approvals the broker cannot be asked about', () => {
  it('malformed approval requests are declined, each answered in its own shape, with nobody asked', async () => {
    const { run: started, asked } = await run(['malformed-approvals'], () => {
      throw new Error('nobody may be asked about a request that names nothing')
    })
    const result = await started.result
    expect(result.stopReason).toBe('completed')
    expect(asked).toEqual([])
    const replies = (JSON.parse(outputText(result.output)) as { result: unknown }[]).map((reply) => reply.result)
    expect(replies).toEqual([
      { decision: 'decline' },
      { decision: 'decline' },
      { decision: 'decline' },
      { permissions: {}, scope: 'turn' },
      { decision: { denied: { rejection: 'codex did not say what it was about' } } },
    ])
    expect(result.diagnostic).toContain('declined command (unnamed): codex did not say what it was about, so nobody could be asked')
    expect(result.diagnostic).toContain('declined file change: codex did not say what it was about')
  })

  it('a request Codex clears itself (serverRequest/resolved) is withdrawn at the broker and never answered', async () => {
    const flag = join(mkdtempSync(join(tmpdir(), 'dsh-codex-flag-')), 'asked')
    let withdrawn: AbortSignal | undefined
    const { run: started } = await run(['cleared-approval', flag], (_request, signal) => {
      withdrawn = signal
      // Tell the stand-in the request is with someone now; never answer it.
      writeFileSync(flag, '')
      return new Promise<never>(() => {})
    })
    const result = await started.result
    expect(existsSync(flag)).toBe(true)
    expect(withdrawn?.aborted).toBe(true)
    expect(harness!.ctx.approvals.pending()).toEqual([])
    // The stand-in got no answer to the request it had cleared.
    expect(outputText(result.output)).toBe('"no reply"')
  })
})
