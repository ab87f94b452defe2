import { existsSync, mkdtempSync, readdirSync, readFileSync, writeFileSync } from 'node:fs'
import { tmpdir } from 'node:os'
import { join } from 'node:path'
import { afterEach, beforeAll, describe, expect, it } from 'vitest'
import { text, textOf } from '@dsh/llm'
import { AcpPlugin } from '@dsh/subagent-acp'
import { dshMain, exampleAgent, isAlive, liveChildren, setup, waitFor, type Setup } from './helpers.js'

let current: Setup | undefined
afterEach(async () => {
  await current?.harness.dispose()
  current = undefined
})

function tempDir(prefix: string): string {
  return mkdtempSync(join(tmpdir(), prefix))
}

describe('acp: the provider drives `dsh acp`', () => {
  let dir: string
  let script: string
  beforeAll(() => {
    if (!existsSync(dshMain)) throw new Error(`${dshMain} is missing: build first (npx tsc -b packages/cli/dsh)`)
    dir = tempDir('acp-dsh-')
    script = join(dir, 'child.yml')
    writeFileSync(
      script,
      [
        '- when: { prompt: "^capital" }',
        '  reply:',
        '    - text: "The capital of France is Paris."',
        // A turn that stays busy: the child delegates (through dsh's default spawn tool)
        // to a grandchild agent whose model never answers.
        '- when: { prompt: "^slow" }',
        '  reply:',
        '    - text: "thinking about it"',
        '      call: { tool: subagent, args: { description: "wait", prompt: "never answered" } }',
        '    - text: "never reached"',
        '- when: { prompt: "never answered" }',
        '  reply:',
        '    - { text: "zzz", delay_ms: 60000 }',
        '- when: { prompt: "^broken" }',
        '  reply:',
        '    - error: "the child model is overloaded"',
      ].join('\n'),
    )
  })

  /** A provider whose children persist their sessions to a fresh `sessions` directory. */
  async function dshProvider(): Promise<Setup & { sessions: string }> {
    const sessions = tempDir('acp-dsh-sessions-')
    current = await setup({ command: process.execPath, args: [dshMain, 'acp', '--model', `scripted:${script}`, '--session-dir', sessions] })
    return { ...current, sessions }
  }

  /** Resolves once the child has logged the model's tool call: the turn is visibly under way. */
  function midTurn(sessions: string): Promise<true> {
    return waitFor(() => (readdirSync(sessions).some((name) => readFileSync(join(sessions, name), 'utf8').includes('"type":"tool/call"')) ? true : undefined), 10_000)
  }

  it('returns the child\'s answer, and the child\'s session is an ordinary persisted dsh session in the parent\'s cwd', async () => {
    const { harness, parent, request, sessions } = await dshProvider()
    const run = await harness.ctx.subagents.start('acp', request('capital of France?'))
    const result = await run.result
    expect(result).toMatchObject({ output: [text('The capital of France is Paris.')], stopReason: 'completed' })
    await run.dispose()
    const files = readdirSync(sessions).filter((name) => name.endsWith('.jsonl'))
    expect(files).toHaveLength(1)
    const lines = readFileSync(join(sessions, files[0]), 'utf8').trim().split('\n').map((line) => JSON.parse(line) as { header?: { origin: string; cwd: string }; type?: string; reason?: string; usage?: { inputTokens: number; outputTokens: number } })
    expect(lines[0].header).toMatchObject({ origin: 'acp', cwd: parent.session.header.cwd })
    expect(lines.at(-1)).toMatchObject({ type: 'turn/end', reason: 'completed' })
    // The child's usage comes back with its answer (dsh acp's `_meta.dsh.usage`), and is what its own session recorded.
    const recorded = lines.filter((line) => line.type === 'assistant/message' && line.usage)
    expect(recorded.length).toBeGreaterThan(0)
    expect(result.usage).toEqual({
      inputTokens: recorded.reduce((sum, line) => sum + line.usage!.inputTokens, 0),
      outputTokens: recorded.reduce((sum, line) => sum + line.usage!.outputTokens, 0),
      cachedInputTokens: 0,
    })
  })

  it('cancel mid-turn resolves aborted with the partial output, and no process remains', async () => {
    const { harness, request, sessions } = await dshProvider()
    const before = liveChildren()
    const run = await harness.ctx.subagents.start('acp', request('slow task'))
    const pid = await waitFor(() => liveChildren().find((candidate) => !before.includes(candidate)))
    await midTurn(sessions)
    run.cancel()
    const result = await run.result
    expect(result.stopReason).toBe('aborted')
    expect(textOf(result.output)).toBe('thinking about it')
    await run.dispose()
    expect(() => process.kill(pid, 0)).toThrow(expect.objectContaining({ code: 'ESRCH' }))
    expect(liveChildren()).toEqual(before)
  })

  it('the child killed with SIGKILL mid-turn settles error with a diagnostic', async () => {
    const { harness, request, sessions } = await dshProvider()
    const before = liveChildren()
    const run = await harness.ctx.subagents.start('acp', request('slow task'))
    const pid = await waitFor(() => liveChildren().find((candidate) => !before.includes(candidate)))
    await midTurn(sessions)
    process.kill(pid, 'SIGKILL')
    const result = await run.result
    expect(result).toMatchObject({ stopReason: 'error', diagnostic: expect.stringContaining('was killed by SIGKILL during session/prompt') })
    await run.dispose()
    expect(isAlive(pid)).toBe(false)
  })

  it('a failed child turn settles error with the child\'s error', async () => {
    const { harness, request } = await dshProvider()
    const run = await harness.ctx.subagents.start('acp', request('broken please'))
    expect(await run.result).toMatchObject({ stopReason: 'error', diagnostic: expect.stringContaining('the child model is overloaded') })
    await run.dispose()
  })
})

describe('acp: the provider drives the official SDK 1.x example agent', () => {
  it('permission reject and allow each get the matching outcome; cancel mid-turn is aborted and leaves no process', async () => {
    current = await setup({ command: process.execPath, args: [exampleAgent] })
    const { harness, request } = current
    await harness.plugin(AcpPlugin, { providerName: 'acp-allow', command: process.execPath, args: [exampleAgent], permission: 'allow' })
    const before = liveChildren()
    // About five seconds a turn by design: the three runs share them.
    const [rejected, allowed, cancelled] = await Promise.all([
      harness.ctx.subagents.start('acp', request('please change the config')),
      harness.ctx.subagents.start('acp-allow', request('please change the config')),
      harness.ctx.subagents.start('acp', request('please change the config')),
    ])
    setTimeout(() => cancelled.cancel(), 1500)
    const [rejectedResult, allowedResult, cancelledResult] = await Promise.all([rejected.result, allowed.result, cancelled.result])
    expect(rejectedResult.stopReason).toBe('completed')
    expect(textOf(rejectedResult.output)).toContain('I understand you prefer not to make that change.')
    expect(textOf(rejectedResult.output)).not.toContain('successfully updated')
    expect(allowedResult.stopReason).toBe('completed')
    expect(textOf(allowedResult.output)).toContain('I\'ve successfully updated the configuration.')
    expect(cancelledResult.stopReason).toBe('aborted')
    expect(textOf(cancelledResult.output)).toContain('I\'ll help you with that.')
    await Promise.all([rejected.dispose(), allowed.dispose(), cancelled.dispose()])
    expect(liveChildren()).toEqual(before)
  })
})
