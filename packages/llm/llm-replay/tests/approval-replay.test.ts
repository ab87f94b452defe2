/**
 * A recorded approval answers, on replay, only the very request it was recorded for: the
 * same tool and the same whole subject (its full text, or for a long one the digest of all
 * of it that the broker shows), never a request of the same tool alone, nor one that only
 * starts alike. A request the recording never decided fails the replay and does not run.
 */
import { createHash } from 'node:crypto'
import { mkdtempSync, readFileSync, rmSync, writeFileSync } from 'node:fs'
import { tmpdir } from 'node:os'
import { join } from 'node:path'
import { afterEach, describe, expect, it } from 'vitest'
import { ApprovalService } from '@dsh/approvals'
import type { PermissionDecision } from '@dsh/base'
import { isReplayAdapter } from '@dsh/llm-replay'
import { createStack, type Stack } from './run-stack.js'

const stacks: Stack[] = []
const dirs: string[] = []
afterEach(async () => {
  await Promise.all(stacks.splice(0).map((stack) => stack.dispose()))
  for (const dir of dirs.splice(0)) rmSync(dir, { recursive: true, force: true })
})

/** Longer than the 256 KiB the broker's rules read whole: two commands that start with it differ only past it. */
const LONG_HEAD = `echo ${'x'.repeat(300 * 1024)}`

interface ApprovalRun {
  stack: Stack
  /** The commands the side-effecting `bash` tool was let run (it runs nothing: it only notes them). */
  ran: string[]
  /** The root turn's end, then the decision on its one `bash` call. */
  run(): Promise<{ reason: string; permission: PermissionDecision | undefined }>
}

/**
 * The real stack with the approval broker, whose default (nobody is there to ask) is
 * `defaultDecision`, and a side-effecting `bash` tool that notes each command it is let run
 * rather than running it. The model, scripted or replayed, makes one call of `bash` on
 * `command`, then answers.
 */
async function approvalRun(options: { model: string; record?: string; command?: string }, defaultDecision: 'allow' | 'reject'): Promise<ApprovalRun> {
  const script = options.command === undefined ? undefined : [{ when: { depth: 0 }, reply: [{ call: { tool: 'bash', args: { command: options.command } } }, { text: 'done' }] }]
  const stack = await createStack({ model: options.model, ...(script && { script }), ...(options.record !== undefined && { record: options.record }) })
  stacks.push(stack)
  await stack.ctx.plugin(ApprovalService, {})
  stack.ctx.approvals.setDefault(defaultDecision, `the test's default ${defaultDecision}`)
  const ran: string[] = []
  stack.ctx.tools.register({
    name: 'bash',
    description: 'notes a command as run',
    parameters: { type: 'object', properties: { command: { type: 'string' } }, required: ['command'] },
    sideEffecting: true,
    execute: (args: { command: string }) => {
      ran.push(args.command)
      return 'ran'
    },
  })
  return {
    stack,
    ran,
    run: async () => {
      const { reason } = await stack.run('tidy up')
      const results = stack.sessions[0]!.ownEvents().filter((event) => event.type === 'tool/result') as unknown as { permission?: PermissionDecision }[]
      expect(results).toHaveLength(1)
      return { reason, permission: results[0]!.permission }
    },
  }
}

/** Record one run whose model asks to run `command` and the default allows it. */
async function recordAllowed(command: string): Promise<string> {
  const dir = mkdtempSync(join(tmpdir(), 'dsh-replay-approval-'))
  dirs.push(dir)
  const recording = await approvalRun({ model: 'scripted:test', record: dir, command }, 'allow')
  const { permission } = await recording.run()
  expect(permission).toMatchObject({ decision: 'allow-once', source: 'default' })
  expect(recording.ran).toEqual([command])
  await recording.stack.dispose()
  return dir
}

/**
 * The recording's model asks to run `command` instead of what it asked when recorded (as a
 * run that diverged would); its recorded approval is left as it was.
 */
function modelNowAsksFor(dir: string, command: string): void {
  const file = join(dir, 'root.jsonl')
  const lines = readFileSync(file, 'utf8').split('\n')
  const first = lines.findIndex((line) => line.startsWith('{"call":0,"response"'))
  const entry = JSON.parse(lines[first]!) as { response: { chunks: { type: string; call?: { args?: { command?: string } } }[] } }
  const asked = entry.response.chunks.filter((chunk) => chunk.call?.args?.command !== undefined)
  expect(asked).toHaveLength(1)
  asked[0]!.call!.args!.command = command
  lines[first] = JSON.stringify(entry)
  writeFileSync(file, lines.join('\n'))
}

function problems(run: ApprovalRun): string[] {
  const adapter = run.stack.ctx.llm.getAdapter('replay')
  return isReplayAdapter(adapter) ? adapter.problems() : ['no replay adapter']
}

describe('a recorded approval answers only the very request it was recorded for', () => {
  it('answers the same tool on the same command, nobody asked (the default here would reject)', async () => {
    const dir = await recordAllowed('ls')
    const replayed = await approvalRun({ model: `replay:${dir}` }, 'reject')
    const { reason, permission } = await replayed.run()
    expect(permission).toMatchObject({ decision: 'allow-once', source: 'replay' })
    expect(replayed.ran).toEqual(['ls'])
    expect(reason).toBe('completed')
    expect(problems(replayed)).toEqual([])
  })

  for (const other of ['rm -rf ~', 'ls; rm -rf ~', 'l']) {
    it(`a recorded allow of bash "ls" does not answer bash ${JSON.stringify(other)}: the replay fails naming the request, and it does not run (the default here would allow)`, async () => {
      const dir = await recordAllowed('ls')
      modelNowAsksFor(dir, other)
      const replayed = await approvalRun({ model: `replay:${dir}` }, 'allow')
      const { permission } = await replayed.run()
      expect(permission).toMatchObject({ decision: 'reject', by: 'the replay', source: 'replay' })
      expect(replayed.ran).toEqual([])
      expect(problems(replayed)[0]).toBe(
        `replay diverged: session root asked to run bash ${JSON.stringify(other)}, which its recording never decided; its next undecided bash request differs: recorded "ls", live ${JSON.stringify(other)} (${join(dir, 'root.jsonl')}:4)`,
      )
    })
  }

  it('a recorded allow of a command longer than 256 KiB does not answer another with the same first 256 KiB', async () => {
    const recorded = `${LONG_HEAD} ok`
    const other = `${LONG_HEAD}; rm -rf ~`
    const dir = await recordAllowed(recorded)
    modelNowAsksFor(dir, other)
    const replayed = await approvalRun({ model: `replay:${dir}` }, 'allow')
    const { permission } = await replayed.run()
    expect(permission).toMatchObject({ decision: 'reject', by: 'the replay', source: 'replay' })
    expect(replayed.ran).toEqual([])
    // Both are shown as the same first 16 KiB: what tells them apart is the digest of all of each.
    const [problem] = problems(replayed)
    expect(problem).toMatch(/^replay diverged: session root asked to run bash "echo x+", which its recording never decided; its next undecided bash request differs: recorded "…[^"]*sha256 [0-9a-f]+…", live "…[^"]*sha256 [0-9a-f]+…"/)
    expect(problem).toContain(`sha256 ${digestOf(recorded).slice(0, 8)}`)
    expect(problem).toContain(`sha256 ${digestOf(other).slice(0, 8)}`)
  })

  it('a recorded allow of a command longer than 256 KiB answers that very command again', async () => {
    const command = `${LONG_HEAD} ok`
    const dir = await recordAllowed(command)
    const replayed = await approvalRun({ model: `replay:${dir}` }, 'reject')
    const { permission } = await replayed.run()
    expect(permission).toMatchObject({ decision: 'allow-once', source: 'replay' })
    expect(replayed.ran).toEqual([command])
    expect(problems(replayed)).toEqual([])
  })
})

function digestOf(text: string): string {
  return createHash('sha256').update(text).digest('hex')
}
