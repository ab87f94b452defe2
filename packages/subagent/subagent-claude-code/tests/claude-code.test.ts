/**
 * The provider against the real Claude Code binary, pointed at the fake Messages API on
 * 127.0.0.1: no network, no key.
 */
import { existsSync, readdirSync, writeFileSync } from 'node:fs'
import { join } from 'node:path'
import { afterEach, describe, expect, it } from 'vitest'
import { text } from '@dsh/llm'
import { SubagentError, type SubagentRunEndInfo } from '@dsh/subagent'
import { gone, setup, tempDir, wrapperScript, type Fixture } from './fixture.js'

/** The result message's usage, as the fake counts it (estimated from the request's size). */
const reportedUsage = { inputTokens: expect.any(Number), outputTokens: expect.any(Number), cachedInputTokens: 0 }

let fixture: Fixture | undefined
afterEach(async () => {
  await fixture?.dispose()
  fixture = undefined
})

async function open(...args: Parameters<typeof setup>): Promise<Fixture> {
  fixture = await setup(...args)
  return fixture
}

interface MessagesBody {
  system?: unknown
  tools?: { name: string }[]
  messages: { role: string; content: string | { type: string; tool_use_id?: string; is_error?: boolean; content?: unknown }[] }[]
}

const isRoot = process.getuid?.() === 0

describe('claude-code: one query() of the Claude Agent SDK per run', () => {
  it('a completed run returns the fake model\'s text, and disposal leaves no process', async () => {
    const { fake, harness, start, workDir, home } = await open([{ text: 'The answer is forty-two.' }])
    const ends: SubagentRunEndInfo[] = []
    harness.ctx.on('subagent/end', (info) => ends.push(info))
    const run = await start('What is the answer?', { label: 'ask' })
    expect(run.local).toBe(false)
    expect(run.id).toBe(`claude-code:${run.remoteId}`)
    expect(await run.result).toEqual({ output: [text('The answer is forty-two.')], stopReason: 'completed', usage: reportedUsage })
    await run.dispose()
    expect(gone(run.pid!)).toBe(true)
    expect(() => process.kill(-run.pid!, 0)).toThrow(expect.objectContaining({ code: 'ESRCH' }))
    expect(ends).toMatchObject([{ provider: 'claude-code', id: run.id, local: false, stopReason: 'completed', lastAssistantMessage: [text('The answer is forty-two.')] }])

    const request = fake.messageRequests[0]!
    const body = request.body as MessagesBody
    expect(request.headers['x-api-key']).toBe('sk-ant-fake')
    expect(JSON.stringify(body.messages)).toContain('What is the answer?')
    // cwd is the parent session's; AskUserQuestion is never offered to the model.
    expect(JSON.stringify(body)).toContain(`Primary working directory: ${workDir}`)
    expect(body.tools?.map((tool) => tool.name)).not.toContain('AskUserQuestion')
    // persistSession: false writes no transcript.
    const projects = join(home, '.claude', 'projects')
    expect(existsSync(projects) ? readdirSync(projects, { recursive: true }).filter((name) => String(name).endsWith('.jsonl')) : []).toEqual([])
  })

  it('a model error (HTTP 500) settles error with the API error text in the diagnostic', async () => {
    const { start } = await open([{ status: 500, error: 'the fake model is on fire' }])
    const run = await start('hi')
    const result = await run.result
    expect(result.stopReason).toBe('error')
    expect(result.diagnostic).toMatch(/is_error true/)
    expect(result.diagnostic).toContain('the fake model is on fire')
    await run.dispose()
    expect(gone(run.pid!)).toBe(true)
  })

  it('a silently empty answer (a stream without content_block_stop) is an error, not a blank success', async () => {
    const { start } = await open([{ text: 'lost words', omitEvents: ['content_block_stop'] }])
    const run = await start('hi')
    const result = await run.result
    expect(result.stopReason).toBe('error')
    expect(result.diagnostic).toMatch(/Claude Code ended with an error result/)
    await run.dispose()
  })

  it('a crashed child (SIGKILL mid-turn) settles error with the signal in the diagnostic', async () => {
    const { fake, start } = await open([{ text: 'never finished', hangAfterEvents: 3 }])
    const run = await start('hi')
    await fake.messageRequest(1)
    process.kill(run.pid!, 'SIGKILL')
    const result = await run.result
    expect(result.stopReason).toBe('error')
    expect(result.diagnostic).toMatch(/during running/)
    expect(result.diagnostic).toMatch(/SIGKILL/)
    await run.dispose()
    expect(gone(run.pid!)).toBe(true)
  })

  it('cancel mid-turn resolves aborted and the whole process tree is gone after dispose', async () => {
    const { fake, start } = await open([{ text: 'never finished', hangAfterEvents: 3 }])
    const controller = new AbortController()
    const run = await start('hi', { signal: controller.signal })
    await fake.messageRequest(1)
    // The fake holds its stream open for ever: the run ends, and the tree goes, because of the cancel.
    controller.abort(new Error('the user pressed stop'))
    const result = await run.result
    expect(result.stopReason).toBe('aborted')
    expect(result.diagnostic).toContain('the user pressed stop')
    await run.dispose()
    expect(gone(run.pid!)).toBe(true)
    expect(() => process.kill(-run.pid!, 0)).toThrow(expect.objectContaining({ code: 'ESRCH' }))
    expect(await fake.messageRequests[0]!.closed).toEqual({ completed: false })
  })

  it('denies every tool permission ask in permissionMode deny and names the denials in the diagnostic', async () => {
    const { fake, start, workDir } = await open([], { permissionMode: 'deny' })
    fake.enqueue(
      {
        text: 'Let me do that.',
        toolUses: [
          { name: 'Bash', input: { command: `touch ${join(workDir, 'bash-ran')}`, description: 'create a marker' } },
          { name: 'Write', input: { file_path: join(workDir, 'written.txt'), content: 'hello' } },
        ],
      },
      { text: 'I was not allowed to run tools, so nothing was changed.' },
    )
    const run = await start('Create the files.')
    const result = await run.result
    await run.dispose()
    expect(result.stopReason).toBe('completed')
    expect(result.output).toEqual([text('I was not allowed to run tools, so nothing was changed.')])
    expect(result.diagnostic).toMatch(/^denied 2 tool permission asks: /)
    expect(result.diagnostic).toContain('Bash {"command":"touch')
    expect(result.diagnostic).toContain('Write {"file_path"')
    expect(existsSync(join(workDir, 'bash-ran'))).toBe(false)
    expect(existsSync(join(workDir, 'written.txt'))).toBe(false)
    // The model was told, in the tool results of its next request.
    const followUp = fake.messageRequests[1]!.body as MessagesBody
    const results = followUp.messages.flatMap((message) => (Array.isArray(message.content) ? message.content : [])).filter((block) => block.type === 'tool_result')
    expect(results).toHaveLength(2)
    expect(results.every((block) => block.is_error === true)).toBe(true)
    expect(JSON.stringify(results)).toContain('permissionMode \\"deny\\"')
  })

  it('a pre-aborted signal rejects without spawning anything', async () => {
    const dir = tempDir('dsh-cc-wrapper-')
    const wrapper = wrapperScript(dir)
    const { start } = await open([{ text: 'unused' }], { executable: wrapper.path })
    const controller = new AbortController()
    controller.abort()
    await expect(start('hi', { signal: controller.signal })).rejects.toMatchObject({ code: 'ABORTED' })
    await new Promise((resolve) => setTimeout(resolve, 200))
    expect(wrapper.pids()).toEqual([])
    // The same wrapper does run when the signal is live (so the check above means something).
    const run = await start('hi')
    expect(wrapper.pids()).toEqual([run.pid])
    await run.result
    await run.dispose()
  })

  it.runIf(isRoot)('a startup failure rejects START_FAILED naming the stage, after reaping the process', async () => {
    // As root, bypass mode needs IS_SANDBOX=1; the machine's `yes` makes the real binary refuse to start.
    const dir = tempDir('dsh-cc-wrapper-')
    const wrapper = wrapperScript(dir)
    const { start, fake } = await open([{ text: 'unused' }], { executable: wrapper.path, permissionMode: 'bypassPermissions', env: { IS_SANDBOX: 'yes' } })
    const error = await start('hi').catch((caught: unknown) => caught)
    expect(error).toBeInstanceOf(SubagentError)
    expect(error).toMatchObject({ code: 'START_FAILED' })
    expect((error as Error).message).toMatch(/stage startup/)
    expect((error as Error).message).toMatch(/root/)
    expect(wrapper.pids()).toHaveLength(1)
    expect(gone(wrapper.pids()[0]!)).toBe(true)
    expect(fake.messageRequests).toHaveLength(0)
  })

  it('bypassPermissions with IS_SANDBOX=1 set for root runs tools without asking', async () => {
    const { fake, start, workDir } = await open([], { permissionMode: 'bypassPermissions' })
    fake.enqueue({ toolUses: [{ name: 'Bash', input: { command: `touch ${join(workDir, 'bash-ran')}`, description: 'create a marker' } }] }, { text: 'Done.' })
    const run = await start('Create the marker.')
    expect(await run.result).toEqual({ output: [text('Done.')], stopReason: 'completed', usage: reportedUsage })
    await run.dispose()
    expect(existsSync(join(workDir, 'bash-ran'))).toBe(true)
  })

  it('a child that never sends init is a START_FAILED after startTimeoutMs, and its whole tree is reaped', async () => {
    const dir = tempDir('dsh-cc-wrapper-')
    // A grandchild in its own session (outside the group) and a child that ignores stdin and SIGTERM.
    const wrapper = wrapperScript(dir, `setsid sleep 60 & echo $! >> ${JSON.stringify(join(dir, 'pids'))}\ntrap '' TERM\nwhile :; do sleep 1; done`)
    const { start } = await open([], { executable: wrapper.path, startTimeoutMs: 500, graceMs: 200 })
    // The child never sends init and ignores TERM for ever: only the start timeout and the reaping end this.
    const error = await start('hi').catch((caught: unknown) => caught)
    expect(error).toMatchObject({ code: 'START_FAILED' })
    expect((error as Error).message).toMatch(/stage startup.*within startTimeoutMs \(500 ms\)/)
    const pids = wrapper.pids()
    expect(pids).toHaveLength(2)
    expect(pids.filter((pid) => !gone(pid))).toEqual([])
  })

  it('a binary that cannot be spawned is a START_FAILED at stage spawn', async () => {
    const dir = tempDir('dsh-cc-wrapper-')
    const notExecutable = join(dir, 'claude')
    writeFileSync(notExecutable, 'not a program\n', { mode: 0o644 })
    const { start } = await open([], { executable: notExecutable })
    const error = await start('hi').catch((caught: unknown) => caught)
    expect(error).toMatchObject({ code: 'START_FAILED' })
    expect((error as Error).message).toMatch(/stage spawn.*EACCES/)
  })

  it('timeoutMs ends a run that takes too long with error, and reaps it', async () => {
    const { start } = await open([{ text: 'too late', delayMs: 30_000 }], { timeoutMs: 2_500 })
    const run = await start('hi')
    const result = await run.result
    expect(result.stopReason).toBe('error')
    expect(result.diagnostic).toMatch(/did not finish within timeoutMs \(2500 ms\)/)
    await run.dispose()
    expect(gone(run.pid!)).toBe(true)
  })

  it('dispose is idempotent and cancels a running child', async () => {
    const { fake, start } = await open([{ text: 'never', hangAfterEvents: 2 }])
    const run = await start('hi')
    await fake.messageRequest(1)
    const first = run.dispose()
    expect(run.dispose()).toBe(first)
    await first
    expect((await run.result).stopReason).toBe('aborted')
    expect(gone(run.pid!)).toBe(true)
  })
})
