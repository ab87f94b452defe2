/**
 * A parent `dsh run` keeping a continuable child that is another `dsh acp` process: the
 * child's ACP session stays open while its process lives, and after the parent's process
 * exits, `dsh run --resume` starts the child again and reopens its session with
 * `session/load`. Everything is real (both CLIs, both session stores); the model is the
 * scripted one, whose resumed sessions continue their rule.
 */
import { spawn } from 'node:child_process'
import { existsSync, readdirSync, readFileSync, rmSync, writeFileSync } from 'node:fs'
import { join } from 'node:path'
import { describe, expect, it } from 'vitest'
import { dshBin, repoRoot, runDsh, tempDir } from './cli.js'

/** The `acp` provider running `dsh acp` on the same script and session directory, and a continuable tool bound to it. */
function config(dir: string, script: string): string {
  const file = join(dir, 'dsh.yml')
  writeFileSync(file, [
    '- id: subagent-acp',
    '  name: "@dsh/subagent-acp"',
    `  config: { command: ${JSON.stringify(process.execPath)}, args: [${JSON.stringify(dshBin)}, acp, --model, ${JSON.stringify(`scripted:${script}`)}, --session-dir, ${JSON.stringify(dir)}], permission: allow, cancelGraceMs: 3000, stdinGraceMs: 3000 }`,
    '- id: tool-subagent-keep',
    '  name: "@dsh/tool-subagent"',
    '  config: { provider: acp, toolName: subagent_keep, backgroundMode: continuable }',
  ].join('\n'))
  return file
}

interface Event {
  type?: string
  reason?: string
  message?: { content: { type: string; text?: string }[] }
}

function eventsOf(file: string): Event[] {
  return readFileSync(file, 'utf8').trim().split('\n').slice(1).map((line) => JSON.parse(line) as Event)
}

function userTexts(file: string): string[] {
  return eventsOf(file).filter((event) => event.type === 'user/message').map((event) => event.message!.content.map((block) => block.text ?? '').join(''))
}

function headerOf(file: string): { id: string; parentSession?: string; origin?: string } {
  return (JSON.parse(readFileSync(file, 'utf8').split('\n')[0]!) as { header: { id: string; parentSession?: string; origin?: string } }).header
}

/** The child's own session: the one `dsh acp` wrote (origin `acp`). */
function acpChildFile(dir: string): string {
  const found = readdirSync(dir).filter((name) => name.endsWith('.jsonl') && headerOf(join(dir, name)).origin === 'acp')
  expect(found).toHaveLength(1)
  return join(dir, found[0]!)
}

/** Live processes whose command line mentions `dir` (every `dsh acp` child here names it). */
function processesMentioning(dir: string): number[] {
  const found: number[] = []
  for (const entry of readdirSync('/proc')) {
    if (!/^\d+$/.test(entry) || Number(entry) === process.pid) continue
    try {
      if (readFileSync(`/proc/${entry}/stat`, 'utf8').split(') ')[1]?.startsWith('Z')) continue
      if (readFileSync(`/proc/${entry}/cmdline`, 'utf8').split('\0').includes(dir)) found.push(Number(entry))
    } catch {
      // Gone meanwhile: not a survivor.
    }
  }
  return found
}

describe('dsh run with a continuable dsh acp child', () => {
  it('keeps the ACP session across turns, reopens it with session/load after the parent process exits; the tree shows one child with three turns, and counts its usage once', async () => {
    const dir = tempDir()
    const script = join(dir, 'script.yml')
    writeFileSync(script, [
      // The child: its first turn runs a tool; later turns quote the latest tool result of
      // their history, which only the first turn has: it is there only if the history is.
      '- when: { prompt: "^research" }',
      '  reply:',
      '    - call: { tool: bash, args: { command: "echo marker-from-turn-one" } }',
      '    - text: "child turn one"',
      '    - text: "child turn two recalls {{last_tool_result}}"',
      '    - text: "child turn three recalls {{last_tool_result}}"',
      '- when: { depth: 0 }',
      '  reply:',
      '    - call: { tool: subagent_keep, args: { description: research, prompt: "research the repo", run_in_background: true } }',
      '    - text: "started the researcher"',
      '    - call: { tool: send_message, args: { subagent_id: research, message: "dig deeper" } }',
      '    - text: "asked for more"',
      '    - text: "noted round two"',
      '    - call: { tool: send_message, args: { subagent_id: research, message: "one more thing" } }',
      '    - text: "asked again"',
      '    - text: "noted round three"',
    ].join('\n'))
    const common = ['--config', config(dir, script), '--model', `scripted:${script}`, '--session-dir', dir]

    const first = await runDsh(['run', '--json', ...common, 'start a researcher'], { timeoutMs: 60_000 })
    expect(first.stderr).toBe('')
    expect(first.code).toBe(0)
    const parentId = (first.stdout.trim().split('\n').map((line) => JSON.parse(line) as { kind: string; header?: { id: string } }).find((line) => line.kind === 'session/header')!.header!).id
    const parentFile = join(dir, `${parentId}.jsonl`)
    const childFile = acpChildFile(dir)
    expect(headerOf(childFile).parentSession).toBe(parentId)
    // Both settled turns of the child reached the parent as notices, with their closing messages.
    const heard = userTexts(parentFile)
    expect(heard[1]).toContain('child turn one')
    expect(heard[2]).toContain('child turn two recalls')
    expect(heard[2]).toContain('marker-from-turn-one')
    expect(userTexts(childFile)).toEqual(['research the repo', 'dig deeper'])
    // The parent process is gone, and with it every dsh acp it started.
    expect(processesMentioning(dir)).toEqual([])

    const second = await runDsh(['run', ...common, '--resume', parentId, 'ask it once more'], { timeoutMs: 60_000 })
    expect(second.code).toBe(0)
    expect(second.stdout).toContain('noted round three')
    // A new dsh acp reopened the same session: its third turn saw the first turn's tool result.
    expect(userTexts(childFile)).toEqual(['research the repo', 'dig deeper', 'one more thing'])
    const closing = userTexts(parentFile).at(-1)!
    expect(closing).toContain('child turn three recalls')
    expect(closing).toContain('marker-from-turn-one')
    expect(eventsOf(childFile).filter((event) => event.type === 'turn/start')).toHaveLength(3)
    expect(processesMentioning(dir)).toEqual([])

    const tree = await runDsh(['sessions', 'tree', parentId, '--session-dir', dir])
    expect(tree.code).toBe(0)
    const lines = tree.stdout.trim().split('\n')
    expect(lines).toHaveLength(2)
    expect(lines[1]).toMatch(/^└─ \S+ .*continuable: 3 turns, idle$/)

    // Usage counts the child once: its parent-side record and its own session both log its answers.
    const tokens = (line: string) => {
      const match = /in (\d+)(?: \(cache hit \d+\))? \/ out (\d+) tokens/.exec(line)
      expect(match, line).not.toBeNull()
      return { input: Number(match![1]), output: Number(match![2]) }
    }
    const withUsage = (await runDsh(['sessions', 'tree', parentId, '--usage', '--session-dir', dir])).stdout.trim().split('\n')
    expect(withUsage).toHaveLength(3)
    expect(withUsage[2]).toMatch(/^usage of the tree \(2 sessions\): /)
    const [parentUsed, childUsed, treeUsed] = withUsage.map(tokens)
    expect(childUsed.input).toBeGreaterThan(0)
    expect(treeUsed).toEqual({ input: parentUsed.input + childUsed.input, output: parentUsed.output + childUsed.output })
    const show = (await runDsh(['sessions', 'show', parentId, '--session-dir', dir])).stdout.split('\n')
    const whole = show.find((line) => line.startsWith('usage of its delegation tree'))!
    expect(whole).toMatch(/^usage of its delegation tree \(2 sessions\): /)
    expect(tokens(whole)).toEqual(treeUsed)
    const perChild = show.slice(show.indexOf(whole) + 1).filter((line) => line.trim() !== '')
    expect(perChild).toHaveLength(1)
    expect(tokens(perChild[0])).toEqual(childUsed)
  })

  it('Ctrl-C during the child\'s turn stops it and leaves no process; after --resume the child is reopened and answers', async () => {
    const dir = tempDir()
    const script = join(dir, 'script.yml')
    writeFileSync(script, [
      '- when: { prompt: "^take forever" }',
      '  reply:',
      '    - { text: "never", delay_ms: 60000 }',
      '    - text: "resumed after the interrupt"',
      '- when: { depth: 0 }',
      '  reply:',
      '    - call: { tool: subagent_keep, args: { description: slow, prompt: "take forever", run_in_background: true } }',
      '    - text: "started it"',
      '    - call: { tool: send_message, args: { subagent_id: slow, message: "go on" } }',
      '    - text: "asked"',
      '    - text: "heard back"',
    ].join('\n'))
    const common = ['--config', config(dir, script), '--model', `scripted:${script}`, '--session-dir', dir]
    const parent = spawn(process.execPath, [dshBin, 'run', ...common, 'go'], { cwd: repoRoot, env: { ...process.env, DSH_HOME: dir }, stdio: ['ignore', 'pipe', 'pipe'] })
    let stderr = ''
    let stdout = ''
    parent.stderr.on('data', (chunk: Buffer) => (stderr += chunk))
    parent.stdout.on('data', (chunk: Buffer) => (stdout += chunk))
    const exited = new Promise<number | null>((resolve) => parent.on('close', (code) => resolve(code)))
    // The parent has answered (in its session file: stdout gets the answer only when the
    // run ends) and the child's first turn is under way in its dsh acp.
    const parentAnswered = () => readdirSync(dir).some((name) => name.endsWith('.jsonl') && readFileSync(join(dir, name), 'utf8').includes('"started it"'))
    await new Promise<void>((resolve, reject) => {
      const check = () => {
        const childTurnStarted = readdirSync(dir).some((name) => name.endsWith('.jsonl') && readFileSync(join(dir, name), 'utf8').includes('take forever') && headerOf(join(dir, name)).origin === 'acp')
        if (parentAnswered() && childTurnStarted) resolve()
        else if (parent.exitCode !== null) reject(new Error(`dsh exited early:\n${stderr}`))
        else setTimeout(check, 50)
      }
      check()
    })
    expect(processesMentioning(dir).length).toBeGreaterThan(0)
    parent.kill('SIGINT')
    expect(await exited).toBe(130)
    expect(processesMentioning(dir)).toEqual([])
    const childFile = acpChildFile(dir)
    expect(eventsOf(childFile).filter((event) => event.type === 'turn/end').at(-1)).toMatchObject({ reason: 'aborted' })

    const parentId = readdirSync(dir).map((name) => join(dir, name)).filter((file) => file.endsWith('.jsonl')).map(headerOf).find((header) => header.origin === 'cli')!.id
    const resumed = await runDsh(['run', ...common, '--resume', parentId, 'carry on'], { timeoutMs: 60_000 })
    expect(resumed.code).toBe(0)
    expect(resumed.stdout).toContain('heard back')
    expect(userTexts(childFile)).toEqual(['take forever', 'go on'])
    expect(userTexts(join(dir, `${parentId}.jsonl`)).at(-1)).toContain('resumed after the interrupt')
    expect(processesMentioning(dir)).toEqual([])
  })

  it('a child whose session cannot be reopened is a clear error to the parent\'s model, and nothing is left running', async () => {
    const dir = tempDir()
    const script = join(dir, 'script.yml')
    writeFileSync(script, [
      '- when: { prompt: "^remember" }',
      '  reply:',
      '    - text: "remembered"',
      '    - text: "unreachable"',
      '- when: { depth: 0 }',
      '  reply:',
      '    - call: { tool: subagent_keep, args: { description: keeper, prompt: "remember this", run_in_background: true } }',
      '    - text: "started the keeper"',
      '    - text: "keeper settled"',
      '    - call: { tool: send_message, args: { subagent_id: keeper, message: "still there?" } }',
      '    - text: "the tool said: {{last_tool_result}}"',
    ].join('\n'))
    const common = ['--config', config(dir, script), '--model', `scripted:${script}`, '--session-dir', dir]
    const first = await runDsh(['run', '--json', ...common, 'start a keeper'], { timeoutMs: 60_000 })
    expect(first.code).toBe(0)
    const parentId = (first.stdout.trim().split('\n').map((line) => JSON.parse(line) as { kind: string; header?: { id: string } }).find((line) => line.kind === 'session/header')!.header!).id
    // The remote session is gone: the child process will start, but session/load cannot find it.
    const childFile = acpChildFile(dir)
    rmSync(childFile)
    expect(existsSync(childFile)).toBe(false)

    const second = await runDsh(['run', ...common, '--resume', parentId, 'ask the keeper'], { timeoutMs: 60_000 })
    expect(second.code).toBe(0)
    expect(second.stdout).toMatch(/the tool said: message not delivered: .*no stored dsh session/)
    expect(processesMentioning(dir)).toEqual([])
  })

  it('a child whose agent cannot be started again is a clear error to the parent\'s model, and nothing is left running', async () => {
    const dir = tempDir()
    const script = join(dir, 'script.yml')
    writeFileSync(script, [
      '- when: { prompt: "^remember" }',
      '  reply:',
      '    - text: "remembered"',
      '- when: { depth: 0 }',
      '  reply:',
      '    - call: { tool: subagent_keep, args: { description: keeper, prompt: "remember this", run_in_background: true } }',
      '    - text: "started the keeper"',
      '    - text: "keeper settled"',
      '    - call: { tool: send_message, args: { subagent_id: keeper, message: "still there?" } }',
      '    - text: "the tool said: {{last_tool_result}}"',
    ].join('\n'))
    const working = config(dir, script)
    const first = await runDsh(['run', '--json', '--config', working, '--model', `scripted:${script}`, '--session-dir', dir, 'start a keeper'], { timeoutMs: 60_000 })
    expect(first.code).toBe(0)
    const parentId = (first.stdout.trim().split('\n').map((line) => JSON.parse(line) as { kind: string; header?: { id: string } }).find((line) => line.kind === 'session/header')!.header!).id
    // The deployment changed: the agent program is gone.
    const broken = join(tempDir('dsh-broken-config-'), 'dsh.yml')
    writeFileSync(broken, readFileSync(working, 'utf8').replace(JSON.stringify(process.execPath), JSON.stringify(join(dir, 'no-such-agent'))))
    const second = await runDsh(['run', '--config', broken, '--model', `scripted:${script}`, '--session-dir', dir, '--resume', parentId, 'ask the keeper'], { timeoutMs: 60_000 })
    expect(second.code).toBe(0)
    expect(second.stdout).toMatch(/the tool said: message not delivered: .*could not be started at stage spawn: cannot run .*no-such-agent.*ENOENT/)
    expect(processesMentioning(dir)).toEqual([])
    expect(userTexts(acpChildFile(dir))).toEqual(['remember this'])
  })
})
