/**
 * An ACP agent's `session/request_permission` goes up to the parent's approval broker: a
 * plain ACP agent (the fixture, on the official SDK) is asked about as `acp "label"`, its
 * command named `bash`, the decision recorded in the parent's session; a flood is bounded
 * without holding up another child; a dsh child's forwarded ask is asked, never decided by a
 * rule of the parent; a malformed request allows nothing; a request pending
 * when the run is cancelled is withdrawn.
 */
import { afterEach, describe, expect, it } from 'vitest'
import { ApprovalService, type ApprovalRequestInfo } from '@dsh/approvals'
import type { PermissionDecision } from '@dsh/base'
import { textOf } from '@dsh/llm'
import { AcpPlugin } from '@dsh/subagent-acp'
import { FAST, fixture, liveChildren, setup, type Setup } from './helpers.js'

let current: Setup | undefined
afterEach(async () => {
  await current?.harness.dispose()
  current = undefined
})

async function withBroker(config: Partial<ApprovalService.Config> = {}, oneAtATime = true) {
  current = await setup({ command: process.execPath, args: [fixture('agent.mjs'), 'permission-wait'] })
  await current.harness.plugin(ApprovalService, config)
  const asked: ApprovalRequestInfo[] = []
  const answer = { next: (_request: ApprovalRequestInfo): PermissionDecision | Promise<PermissionDecision> => ({ decision: 'allow-once', by: 'the test user' }) }
  const removeFrontEnd = current.harness.ctx.approvals.addFrontEnd({
    name: 'the test user',
    oneAtATime,
    ask: async (request) => {
      asked.push(request)
      return answer.next(request)
    },
  })
  return { ...current, asked, answer, removeFrontEnd }
}

describe('acp: an agent\'s permission requests go to the parent\'s broker', () => {
  it('a plain ACP agent is asked about by its path, its command named bash, and the decision recorded in the parent\'s session', async () => {
    const { harness, request, parent, asked, answer } = await withBroker()
    answer.next = () => ({ decision: 'reject', by: 'the test user', reason: 'not that' })
    const run = await harness.ctx.subagents.start('acp', request('rm -rf build', { label: 'cleaner' }))
    const result = await run.result
    await run.dispose()
    expect(textOf(result.output)).toContain('{"outcome":"selected","optionId":"no"}')
    expect(asked).toHaveLength(1)
    expect(asked[0]).toMatchObject({ path: [expect.any(String), 'acp "cleaner"'], tool: 'bash', subject: 'rm -rf build', kind: 'execute', child: run.id })
    const recorded = parent.session.events().find((event) => event.type === 'approval')
    expect(recorded).toMatchObject({ request: { tool: 'bash', subject: 'rm -rf build', child: run.id }, permission: { decision: 'reject', by: 'the test user', source: 'user' } })
  })

  it('a rule of the parent decides before anyone is asked, and "always" is answered to a plain agent as allow once', async () => {
    const { harness, request, asked, answer } = await withBroker({ allow: ['bash(make*)'] })
    const allowed = await harness.ctx.subagents.start('acp', request('make all'))
    expect(textOf((await allowed.result).output)).toContain('"optionId":"yes"')
    await allowed.dispose()
    expect(asked).toHaveLength(0)
    answer.next = () => ({ decision: 'allow-always', by: 'the test user' })
    const always = await harness.ctx.subagents.start('acp', request('npm publish'))
    // Its own "always" might cover more than this request: the broker remembers it here instead.
    expect(textOf((await always.result).output)).toContain('"optionId":"yes"')
    await always.dispose()
  })

  it('a dsh child\'s forwarded ask is asked, never answered by the parent\'s wildcard allow rule, and rejected when nobody is there to ask', async () => {
    const { harness, request, asked, answer, removeFrontEnd } = await withBroker({ allow: ['bash'] })
    await harness.plugin(AcpPlugin, { ...FAST, providerName: 'acp-dsh', command: process.execPath, args: [fixture('agent.mjs'), 'permission-forwarded'] })
    const forwarded = async (policy?: 'ask') => {
      const run = await harness.ctx.subagents.start('acp-dsh', request(JSON.stringify({ command: 'rm -rf build', ...(policy && { policy }) }), { label: 'dsh child' }))
      const said = textOf((await run.result).output)
      await run.dispose()
      return said
    }
    // Without the child's ask, the parent's rule decides, unasked: the rule is in force.
    expect(await forwarded()).toContain('"optionId":"yes"')
    expect(asked).toHaveLength(0)
    // With it, the parent's front-end is asked with the child's verdict, and its answer holds.
    answer.next = () => ({ decision: 'reject', by: 'the test user', reason: 'not that' })
    expect(await forwarded('ask')).toContain('"optionId":"no"')
    expect(asked).toHaveLength(1)
    expect(asked[0]).toMatchObject({ tool: 'bash', subject: 'rm -rf build', policy: 'ask' })
    // With nobody to ask, a request a rule asks about is rejected, whatever the default or the wildcard say.
    removeFrontEnd()
    harness.ctx.approvals.setDefault('allow', 'the test')
    expect(await forwarded('ask')).toContain('"optionId":"no"')
    expect(asked).toHaveLength(1)
    expect(await forwarded()).toContain('"optionId":"yes"')
  })

  it('a flood of 1,000 requests from one agent is bounded, and another child running at once is still asked', async () => {
    // A front-end that shows every request at once (an editor's list), whose user takes
    // their time over the flood: its requests stay open until the other child has been asked.
    const { harness, request, asked, answer } = await withBroker({ maxPendingPerAgent: 4 }, false)
    let release!: () => void
    const otherAsked = new Promise<void>((resolve) => (release = resolve))
    answer.next = async (request) => {
      if (request.path.at(-1) === 'acp "other"') release()
      else await otherAsked
      return { decision: 'allow-once', by: 'the test user' }
    }
    await harness.plugin(AcpPlugin, { ...FAST, providerName: 'acp-flood', command: process.execPath, args: [fixture('agent.mjs'), 'permission-flood'] })
    const flood = await harness.ctx.subagents.start('acp-flood', request('1000', { label: 'flooder' }))
    const other = await harness.ctx.subagents.start('acp', request('echo other', { label: 'other' }))
    const [floodResult, otherResult] = await Promise.all([flood.result, other.result])
    const counts = JSON.parse(textOf(floodResult.output)) as Record<string, number>
    // Four at a time were put to the user; the rest were refused at once, never allowed.
    expect(counts.no ?? 0).toBeGreaterThan(900)
    expect((counts.yes ?? 0) + (counts.no ?? 0)).toBe(1000)
    expect(textOf(otherResult.output)).toContain('"optionId":"yes"')
    expect(asked.some((entry) => entry.path.at(-1) === 'acp "other"')).toBe(true)
    await Promise.all([flood.dispose(), other.dispose()])
  })

  it('a malformed permission request is refused with an error the agent reads, and allows nothing', async () => {
    const { harness, request, asked } = await withBroker()
    await harness.plugin(AcpPlugin, { ...FAST, providerName: 'acp-bad', command: process.execPath, args: [fixture('agent.mjs'), 'permission-bad'] })
    const run = await harness.ctx.subagents.start('acp-bad', request('go'))
    const said = textOf((await run.result).output).split('\n')
    await run.dispose()
    expect(said).toHaveLength(2)
    expect(said.every((line) => line.startsWith('refused: '))).toBe(true)
    expect(asked).toHaveLength(0)
  })

  it('cancelling the run while its request waits withdraws it at once: the agent reads cancelled, and no process is left', async () => {
    const before = liveChildren()
    const { harness, request, asked, answer } = await withBroker()
    let entered!: () => void
    const waiting = new Promise<void>((resolve) => (entered = resolve))
    answer.next = () => {
      entered()
      return new Promise(() => {})
    }
    const run = await harness.ctx.subagents.start('acp', request('deploy'))
    await waiting
    expect(harness.ctx.approvals.waitingUnder(run.id)).toHaveLength(1)
    run.cancel()
    const result = await run.result
    expect(result.stopReason).toBe('aborted')
    expect(textOf(result.output)).toContain('{"outcome":"cancelled"}')
    expect(harness.ctx.approvals.pending()).toEqual([])
    expect(asked).toHaveLength(1)
    await run.dispose()
    expect(liveChildren()).toEqual(before)
  })
})
