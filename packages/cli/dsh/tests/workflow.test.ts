import { spawn } from 'node:child_process'
import { mkdirSync, readdirSync, readFileSync, rmSync, writeFileSync } from 'node:fs'
import { join } from 'node:path'
import { afterEach, beforeEach, describe, expect, it } from 'vitest'
import { dshBin, repoRoot, runDsh, tempDir } from './cli.js'
import { until } from './processes.js'

/**
 * dsh workflow run through the built CLI, keyless: a reviewer helper (a spawn child on a
 * scripted model that answers with structured output) over fixture files. What ran, and
 * how many at once, is read from the children's session files.
 */
let project: string
let sessions: string
beforeEach(() => {
  project = tempDir('dsh-workflow-')
  sessions = join(project, 'sessions')
  write('.dsh/agents/reviewer.md', `---\nname: reviewer\ndescription: Reviews one file and returns a verdict.\ntools: [read]\n---\nYou review one file.\n`)
  write('model.yml', `- when: { prompt: "^Review" }\n  reply:\n    - delay_ms: 60\n      call: { tool: structured_output, args: { verdict: ok } }\n- reply:\n    - text: plain answer\n`)
  for (let index = 1; index <= 40; index++) write(`files/f${String(index).padStart(2, '0')}.txt`, `file ${index}\n`)
  write('review.mjs', REVIEW)
})
afterEach(() => rmSync(project, { recursive: true, force: true }))

function write(file: string, text: string): void {
  const path = join(project, file)
  mkdirSync(join(path, '..'), { recursive: true })
  writeFileSync(path, text)
}

const REVIEW = `import { readdirSync } from 'node:fs'
export default async ({ agent, parallel }) => {
  const files = readdirSync('files').sort()
  const schema = { type: 'object', properties: { verdict: { type: 'string' } }, required: ['verdict'] }
  const results = await parallel(files, (file) => agent('reviewer', 'Review files/' + file, { schema, label: file }), { concurrency: Number(process.env.WF_CONCURRENCY ?? 4) })
  return { reviewed: results.length, verdicts: results.map((result) => result.structured.verdict) }
}
`

interface StoredSession {
  header: { id: string; parentSession?: string; toolCallId?: string; origin?: string }
  events: Array<{ type: string; ts: number; reason?: string; record?: { workflow?: { key: string; stopReason: string; reused?: boolean } } }>
}

function readSessions(): StoredSession[] {
  return readdirSync(sessions)
    .filter((name) => name.endsWith('.jsonl'))
    .map((name) => {
      const lines = readFileSync(join(sessions, name), 'utf8').split('\n').filter((line) => line.trim() !== '')
      const parsed = lines.flatMap((line) => {
        try {
          return [JSON.parse(line) as Record<string, unknown>]
        } catch {
          return [] // a line a killed process left half written
        }
      })
      const header = (parsed[0] as { header: StoredSession['header'] }).header
      return { header, events: parsed.slice(1) as StoredSession['events'] }
    })
}

const childrenOf = (root: string) => readSessions().filter((session) => session.header.parentSession === root)
const completed = (session: StoredSession) => session.events.some((event) => event.type === 'turn/end' && event.reason === 'completed')

/** The most children whose [first event, turn end] intervals overlap at one instant. */
function mostAtOnce(children: StoredSession[]): number {
  const marks = children.flatMap((child) => {
    const start = child.events[0]!.ts
    const end = child.events.findLast((event) => event.type === 'turn/end')?.ts ?? child.events.at(-1)!.ts
    return [
      { at: start, delta: 1 },
      { at: end, delta: -1 },
    ]
  })
  // Ends before starts at the same millisecond: a slot handed on is not two at once.
  marks.sort((a, b) => a.at - b.at || a.delta - b.delta)
  let running = 0
  let most = 0
  for (const mark of marks) most = Math.max(most, (running += mark.delta))
  return most
}

const rootOf = () => readSessions().find((session) => session.header.origin === 'workflow')!

describe('dsh workflow run', () => {
  it('runs a reviewer over 40 files at most 4 at once, collects the structured results and prints the summary', async () => {
    const result = await runDsh(['workflow', 'run', 'review.mjs', '--model', 'scripted:model.yml', '--session-dir', sessions, '--json'], { cwd: project, timeoutMs: 60_000 })
    expect(result.stderr).not.toMatch(/Error|stack/)
    expect(result.code).toBe(0)
    const printed = JSON.parse(result.stdout) as { session: string; value: { reviewed: number; verdicts: string[] }; calls: { run: number; reused: number } }
    expect(printed.value).toEqual({ reviewed: 40, verdicts: Array(40).fill('ok') })
    expect(printed.calls).toMatchObject({ run: 40, reused: 0, failed: 0 })
    expect(result.stderr).toContain('workflow finished: 40 calls run, 0 reused, 0 failed')
    const children = childrenOf(printed.session)
    expect(children).toHaveLength(40)
    expect(children.every(completed)).toBe(true)
    const most = mostAtOnce(children)
    expect(most).toBeLessThanOrEqual(4)
    expect(most).toBeGreaterThan(1)
  })

  it('holds parallel() to the tree cap when it asks for more, and says so once', async () => {
    const result = await runDsh(['workflow', 'run', 'review.mjs', '--model', 'scripted:model.yml', '--session-dir', sessions, '--max-concurrent', '2'], { cwd: project, timeoutMs: 60_000, env: { WF_CONCURRENCY: '8' } })
    expect(result.code).toBe(0)
    expect(result.stderr.match(/asks for concurrency 8, above the tree's cap of 2/g)).toHaveLength(1)
    expect(mostAtOnce(childrenOf(rootOf().header.id))).toBeLessThanOrEqual(2)
  })

  it('killed with SIGKILL half-way and resumed, finishes without running a finished call again', async () => {
    write('model.yml', `- when: { prompt: "^Review" }\n  reply:\n    - delay_ms: 150\n      call: { tool: structured_output, args: { verdict: ok } }\n`)
    const env = { ...process.env, DSH_HOME: tempDir('dsh-home-') }
    delete env.DEEPSEEK_API_KEY
    const first = spawn(process.execPath, [dshBin, 'workflow', 'run', 'review.mjs', '--model', 'scripted:model.yml', '--session-dir', sessions], { cwd: project, env, stdio: ['ignore', 'pipe', 'pipe'] })
    let stderr = ''
    first.stderr.on('data', (chunk: Buffer) => (stderr += chunk))
    const exited = new Promise<void>((resolve) => first.on('exit', () => resolve()))
    let gone = false
    void exited.then(() => (gone = true))
    // Half-way: 20 calls recorded as finished in the root session.
    const finishedInRoot = () => {
      try {
        return rootOf()?.events.filter((event) => event.type === 'tool/result' && event.record?.workflow?.stopReason === 'completed') ?? []
      } catch {
        return []
      }
    }
    await until(() => finishedInRoot().length >= 20, () => (gone ? `the first run ended before it was killed: ${stderr}` : undefined))
    first.kill('SIGKILL')
    await exited
    const root = rootOf()
    const recorded = new Set(finishedInRoot().map((event) => event.record!.workflow!.key))
    expect(recorded.size).toBeGreaterThanOrEqual(20)
    expect(recorded.size).toBeLessThan(40)

    const resumed = await runDsh(['workflow', 'run', 'review.mjs', '--model', 'scripted:model.yml', '--session-dir', sessions, '--resume', root.header.id, '--json'], { cwd: project, timeoutMs: 60_000 })
    expect(resumed.code).toBe(0)
    const printed = JSON.parse(resumed.stdout) as { value: { reviewed: number }; calls: { run: number; reused: number } }
    expect(printed.value.reviewed).toBe(40)
    expect(printed.calls.reused).toBe(recorded.size)
    expect(printed.calls.run).toBe(40 - recorded.size)
    // Counted from the sessions: each call that had finished has exactly one child, and all 40 finished.
    const children = childrenOf(root.header.id)
    const byCall = new Map<string, StoredSession[]>()
    for (const child of children) byCall.set(child.header.toolCallId!, [...(byCall.get(child.header.toolCallId!) ?? []), child])
    const keyOfCall = (callId: string) => callId.slice(3, 19)
    for (const [callId, list] of byCall) {
      if ([...recorded].some((key) => key.startsWith(keyOfCall(callId)))) expect(list, callId).toHaveLength(1)
    }
    expect(new Set(children.filter(completed).map((child) => child.header.toolCallId)).size).toBe(40)
  })

  it('refuses a file that does not load, a TypeScript file and a --resume of no workflow run, in one line', async () => {
    write('broken.mjs', 'export default async (api) => {\n')
    const broken = await runDsh(['workflow', 'run', 'broken.mjs', '--model', 'scripted:model.yml', '--session-dir', sessions], { cwd: project })
    expect(broken.code).toBe(2)
    expect(broken.stderr.trim().split('\n')).toHaveLength(1)
    expect(broken.stderr).toMatch(/^dsh workflow run: workflow broken\.mjs does not load: /)
    write('typed.ts', 'export default async (api: unknown) => 1\n')
    const typed = await runDsh(['workflow', 'run', 'typed.ts', '--model', 'scripted:model.yml', '--session-dir', sessions], { cwd: project })
    expect(typed.code).toBe(2)
    expect(typed.stderr).toContain('TypeScript workflows are not supported yet')
    const unknownRun = await runDsh(['workflow', 'run', 'review.mjs', '--model', 'scripted:model.yml', '--session-dir', sessions, '--resume', 'no-such-session'], { cwd: project })
    expect(unknownRun.code).toBe(2)
    expect(unknownRun.stderr).toContain('dsh workflow run: no stored session no-such-session')
    const plain = await runDsh(['run', '--model', 'scripted:model.yml', '--session-dir', sessions, 'hello'], { cwd: project })
    const plainId = readSessions().find((session) => session.header.origin === 'cli')!.header.id
    expect(plain.code).toBe(0)
    const notWorkflow = await runDsh(['workflow', 'run', 'review.mjs', '--model', 'scripted:model.yml', '--session-dir', sessions, '--resume', plainId], { cwd: project })
    expect(notWorkflow.code).toBe(2)
    expect(notWorkflow.stderr).toContain(`session ${plainId} is not a workflow run's`)
  })

  it('names the helpers there are when agent() names none, and keeps what finished when the workflow throws', async () => {
    write('unknown.mjs', `export default async ({ agent }) => agent('nope', 'hello')\n`)
    const unknown = await runDsh(['workflow', 'run', 'unknown.mjs', '--model', 'scripted:model.yml', '--session-dir', sessions], { cwd: project })
    expect(unknown.code).toBe(1)
    expect(unknown.stderr).toContain('agent("nope"): there is no helper or provider named "nope"; helpers: reviewer; providers: ')
    write('throws.mjs', `export default async ({ agent }) => {\n  await agent('spawn', 'say something', { label: 'first' })\n  throw new Error('boom after one call')\n}\n`)
    const threw = await runDsh(['workflow', 'run', 'throws.mjs', '--model', 'scripted:model.yml', '--session-dir', sessions], { cwd: project })
    expect(threw.code).toBe(1)
    expect(threw.stderr).toContain('the workflow threw: boom after one call')
    expect(JSON.parse(threw.stdout)).toEqual([{ label: 'first', text: 'plain answer' }])
  })

  it('ends at the budget with what finished, and says so', async () => {
    const result = await runDsh(['workflow', 'run', 'review.mjs', '--model', 'scripted:model.yml', '--session-dir', sessions, '--budget', 'children=6', '--json'], { cwd: project, timeoutMs: 60_000 })
    expect(result.code).toBe(1)
    const printed = JSON.parse(result.stdout) as { stopped: { code: string }; finished: unknown[]; calls: { run: number } }
    expect(printed.stopped.code).toBe('BUDGET')
    expect(printed.finished.length).toBe(printed.calls.run)
    expect(printed.calls.run).toBeLessThanOrEqual(6)
    expect(result.stderr).toContain('workflow stopped by its budget')
    // The budget's warning, a notice to the root, asked no model: the root's one step is the workflow's.
    const root = rootOf()
    expect(root.events.some((event) => event.type === 'input/queued')).toBe(true)
    expect(root.events.filter((event) => event.type === 'step/start')).toHaveLength(1)
    expect(root.events.filter((event) => event.type === 'assistant/message')).toHaveLength(1)
  })
  it('does not reuse a finished call whose child ran a command outside a workspace unless told to, and warns that the file changed', async () => {
    write('model.yml', `- when: { prompt: "^Touch" }\n  reply:\n    - call: { tool: bash, args: { command: "echo touched >> marker.txt" } }\n    - text: touched\n- reply:\n    - text: plain answer\n`)
    write('effects.mjs', `export const options = { rerunSideEffects: process.env.RERUN === '1' }
export default async ({ agent }) => {
  const quiet = await agent('spawn', 'Say something', { label: 'quiet' })
  const touched = await agent('spawn', 'Touch the marker', { label: 'touch' })
  if (process.env.FAIL === '1') throw new Error('stopping half-way')
  return [quiet.text, touched.text]
}
`)
    const run = (env: Record<string, string>, ...extra: string[]) => runDsh(['workflow', 'run', 'effects.mjs', '--model', 'scripted:model.yml', '--session-dir', sessions, '--permission', 'allow', ...extra], { cwd: project, env, timeoutMs: 60_000 })
    const first = await run({ FAIL: '1' })
    expect(first.code).toBe(1)
    const id = rootOf().header.id
    expect(readFileSync(join(project, 'marker.txt'), 'utf8')).toBe('touched\n')
    const refused = await run({}, '--resume', id)
    expect(refused.code).toBe(1)
    expect(refused.stderr).toContain('the call agent("spawn") labelled "touch"')
    expect(refused.stderr).toContain('had side effects outside a workspace (bash: echo touched >> marker.txt)')
    expect(refused.stderr).toContain('rerunSideEffects: true')
    expect(readFileSync(join(project, 'marker.txt'), 'utf8')).toBe('touched\n')
    // The file changes (a line added): the warning names the lines; the calls' keys still match.
    write('effects.mjs', `// reviewed\n${readFileSync(join(project, 'effects.mjs'), 'utf8')}`)
    const again = await run({ RERUN: '1' }, '--resume', id, '--json')
    expect(again.code).toBe(0)
    expect(again.stderr).toContain(`effects.mjs changed since session ${id} ran it (nothing (at line 1) then, line 1 now`)
    expect(JSON.parse(again.stdout)).toMatchObject({ value: ['plain answer', 'touched'], calls: { run: 1, reused: 1 } })
    expect(readFileSync(join(project, 'marker.txt'), 'utf8')).toBe('touched\ntouched\n')
  })

  it('stops a workflow that never returns at the tree\'s wall time', async () => {
    write('forever.mjs', `export default async ({ agent }) => {\n  await agent('spawn', 'Say something', { label: 'before' })\n  await new Promise(() => {})\n}\n`)
    const result = await runDsh(['workflow', 'run', 'forever.mjs', '--model', 'scripted:model.yml', '--session-dir', sessions, '--budget', 'wallTimeMs=1500'], { cwd: project, timeoutMs: 60_000 })
    expect(result.code).toBe(1)
    expect(result.stderr).toContain("the workflow did not return within the tree's wall time (tree.budget.wallTimeMs, 1500 ms)")
    expect(JSON.parse(result.stdout)).toEqual([{ label: 'before', text: 'plain answer' }])
  })
  it('stops on SIGINT with 130, keeping what finished for a resume', async () => {
    write('model.yml', `- when: { prompt: "^Review" }\n  reply:\n    - delay_ms: 150\n      call: { tool: structured_output, args: { verdict: ok } }\n`)
    const env = { ...process.env, DSH_HOME: tempDir('dsh-home-') }
    const child = spawn(process.execPath, [dshBin, 'workflow', 'run', 'review.mjs', '--model', 'scripted:model.yml', '--session-dir', sessions, '--json'], { cwd: project, env, stdio: ['ignore', 'pipe', 'pipe'] })
    let stdout = ''
    let stderr = ''
    child.stdout.on('data', (chunk: Buffer) => (stdout += chunk))
    child.stderr.on('data', (chunk: Buffer) => (stderr += chunk))
    const exited = new Promise<number | null>((resolve) => child.on('exit', (code) => resolve(code)))
    await until(() => {
      try {
        return rootOf()?.events.some((event) => event.record?.workflow?.stopReason === 'completed') ?? false
      } catch {
        return false
      }
    })
    child.kill('SIGINT')
    expect(await exited).toBe(130)
    expect(stderr).toContain('the workflow was cancelled by SIGINT')
    const printed = JSON.parse(stdout) as { stopped: { code: string }; finished: unknown[] }
    expect(printed.stopped.code).toBe('CANCELLED')
    expect(printed.finished.length).toBeGreaterThan(0)
    expect(printed.finished.length).toBeLessThan(40)
  })
  it('does not reuse silently a call whose child in another process (a dsh acp child) ran a command outside a workspace', async () => {
    write('model.yml', `- when: { prompt: "^Touch" }\n  reply:\n    - call: { tool: bash, args: { command: "echo touched >> marker.txt" } }\n    - text: touched\n- reply:\n    - text: plain answer\n`)
    const config = join(tempDir('dsh-workflow-acp-'), 'acp.yml')
    writeFileSync(config, `- id: subagent-acp\n  name: "@dsh/subagent-acp"\n  config:\n    providerName: acp\n    command: ${process.execPath}\n    args: [${join(repoRoot, 'packages/cli/dsh/dist/main.js')}, acp, --model, "scripted:model.yml"]\n`)
    write('remote.mjs', `export default async ({ agent }) => {\n  const touched = await agent('acp', 'Touch the marker', { label: 'remote touch' })\n  if (process.env.FAIL === '1') throw new Error('stopping half-way')\n  return touched.text\n}\n`)
    const run = (env: Record<string, string>, ...extra: string[]) => runDsh(['workflow', 'run', 'remote.mjs', '--config', config, '--model', 'scripted:model.yml', '--session-dir', sessions, '--permission', 'allow', ...extra], { cwd: project, env, timeoutMs: 60_000 })
    const first = await run({ FAIL: '1' })
    expect(first.stderr).toContain('stopping half-way')
    expect(readFileSync(join(project, 'marker.txt'), 'utf8')).toBe('touched\n')
    const refused = await run({}, '--resume', rootOf().header.id)
    expect(refused.code).toBe(1)
    expect(refused.stderr).toContain('the call agent("acp") labelled "remote touch"')
    expect(refused.stderr).toContain('(bash: echo touched >> marker.txt)')
    expect(readFileSync(join(project, 'marker.txt'), 'utf8')).toBe('touched\n')
  })
  it('does not reuse silently a call whose local child delegated to a dsh acp grandchild that ran a command outside a workspace', async () => {
    write('model.yml', `- when: { prompt: "^Touch" }\n  reply:\n    - call: { tool: bash, args: { command: "echo touched >> marker.txt" } }\n    - text: touched\n- when: { prompt: "^Delegate" }\n  reply:\n    - call: { tool: subagent_acp, args: { description: touch, prompt: "Touch the marker" } }\n    - text: delegated\n- reply:\n    - text: plain answer\n`)
    const config = join(tempDir('dsh-workflow-acp-'), 'acp.yml')
    writeFileSync(
      config,
      `- id: subagent-acp\n  name: "@dsh/subagent-acp"\n  config:\n    providerName: acp\n    command: ${process.execPath}\n    args: [${join(repoRoot, 'packages/cli/dsh/dist/main.js')}, acp, --model, "scripted:model.yml"]\n- id: tool-subagent-acp\n  name: "@dsh/tool-subagent"\n  config:\n    provider: acp\n    toolName: subagent_acp\n`,
    )
    write('grandchild.mjs', `export default async ({ agent }) => {\n  const delegated = await agent('spawn', 'Delegate the touch', { label: 'delegated touch' })\n  if (process.env.FAIL === '1') throw new Error('stopping half-way')\n  return delegated.text\n}\n`)
    const run = (env: Record<string, string>, ...extra: string[]) => runDsh(['workflow', 'run', 'grandchild.mjs', '--config', config, '--model', 'scripted:model.yml', '--session-dir', sessions, '--permission', 'allow', ...extra], { cwd: project, env, timeoutMs: 60_000 })
    const first = await run({ FAIL: '1' })
    expect(first.stderr).toContain('stopping half-way')
    expect(readFileSync(join(project, 'marker.txt'), 'utf8')).toBe('touched\n')
    const refused = await run({}, '--resume', rootOf().header.id)
    expect(refused.code).toBe(1)
    expect(refused.stderr).toContain('the call agent("spawn") labelled "delegated touch"')
    expect(refused.stderr).toContain('(bash: echo touched >> marker.txt)')
    expect(readFileSync(join(project, 'marker.txt'), 'utf8')).toBe('touched\n')
  })
})
