import { writeFileSync } from 'node:fs'
import { join } from 'node:path'
import { describe, expect, it } from 'vitest'
import { repoRoot, runDsh, tempDir } from './cli.js'

const config = join(repoRoot, 'examples/delegate.yml')

/** Two children that each stream text and call tools, so progress has something to say. */
function busyChildren(dir: string): string {
  const file = join(dir, 'script.yml')
  writeFileSync(file, [
    '- when: { prompt: "^count files" }',
    '  reply:',
    '    - text: "Counting the files, one chunk after another, so there is text to stream."',
    '      calls:',
    '        - { tool: bash, args: { command: "echo one" } }',
    '        - { tool: bash, args: { command: "echo two" } }',
    '    - text: "there are two"',
    '- when: { prompt: "^check the plan" }',
    '  reply:',
    '    - text: "Checking."',
    '      call: { tool: bash, args: { command: "echo plan" } }',
    '    - text: "the plan holds"',
    '- when: { depth: 0 }',
    '  reply:',
    '    - calls:',
    '        - { tool: subagent, args: { description: "counter", prompt: "count files" } }',
    '        - { tool: subagent_fork, args: { description: "checker", prompt: "check the plan" } }',
    '    - text: "both answered"',
  ].join('\n'))
  return file
}

describe('children\'s progress outside a terminal', () => {
  it('piped: one line per tool call per child, attributed to it, between its start and end, and none for text', async () => {
    const dir = tempDir()
    const result = await runDsh(['run', '--permission', 'allow', '--config', config, '--model', `scripted:${busyChildren(dir)}`, '--session-dir', dir, 'go'])
    expect(result.code).toBe(0)
    const lines = result.stderr.trim().split('\n')
    const tools = lines.filter((line) => line.startsWith('[subagent] tool '))
    expect(tools).toHaveLength(3)
    const counter = /^\[subagent\] start spawn (\S+) "counter"/.exec(lines.find((line) => line.includes('"counter"') && line.includes(' start '))!)![1]
    const checker = /^\[subagent\] start fork (\S+) "checker"/.exec(lines.find((line) => line.includes('"checker"') && line.includes(' start '))!)![1]
    expect(tools.filter((line) => line.startsWith(`[subagent] tool spawn ${counter} "counter" bash `)).sort()).toEqual([
      `[subagent] tool spawn ${counter} "counter" bash {"command":"echo one"}`,
      `[subagent] tool spawn ${counter} "counter" bash {"command":"echo two"}`,
    ])
    expect(tools.filter((line) => line.includes(checker))).toEqual([`[subagent] tool fork ${checker} "checker" bash {"command":"echo plan"}`])
    for (const id of [counter, checker]) {
      const mine = lines.map((line, index) => ({ line, index })).filter(({ line }) => line.includes(id))
      expect(mine[0].line).toContain('] start ')
      expect(mine.at(-1)!.line).toMatch(new RegExp(`^\\[subagent\\] end \\w+ ${id} completed after \\d+\\.\\ds$`))
    }
    // Nothing but lifecycle and tool lines: no line per streamed text.
    expect(lines.every((line) => /^\[subagent\] (start|tool|end) /.test(line))).toBe(true)
  })

  it('--json: progress records of each child, in order between its start and end, naming the child', async () => {
    const dir = tempDir()
    const result = await runDsh(['run', '--json', '--permission', 'allow', '--config', config, '--model', `scripted:${busyChildren(dir)}`, '--session-dir', dir, 'go'])
    expect(result.code).toBe(0)
    interface Record {
      kind: string
      runId?: string
      id?: string
      label?: string
      provider?: string
      seq?: number
      updates?: Array<{ kind: string; name?: string; args?: string; text?: string }>
      usage?: { inputTokens: number; outputTokens: number }
    }
    const records = result.stdout.trim().split('\n').map((line) => JSON.parse(line) as Record)
    const starts = records.filter((record) => record.kind === 'subagent/start')
    expect(starts).toHaveLength(2)
    for (const start of starts) {
      const indexOf = (record: Record) => records.indexOf(record)
      const end = records.find((record) => record.kind === 'subagent/end' && record.runId === start.runId)!
      const progress = records.filter((record) => record.kind === 'subagent/progress' && record.runId === start.runId)
      expect(progress.length).toBeGreaterThan(0)
      expect(progress.every((record) => indexOf(record) > indexOf(start) && indexOf(record) < indexOf(end))).toBe(true)
      expect(progress.map((record) => record.seq)).toEqual(progress.map((_, index) => index + 1))
      expect(progress.every((record) => record.id === start.id && record.label === start.label && record.provider === start.provider)).toBe(true)
      const updates = progress.flatMap((record) => record.updates!)
      const tools = updates.filter((update) => update.kind === 'tool-start').map((update) => update.args)
      expect(tools.sort()).toEqual(start.label === 'counter' ? ['{"command":"echo one"}', '{"command":"echo two"}'] : ['{"command":"echo plan"}'])
      expect(updates.filter((update) => update.kind === 'text').map((update) => update.text).join('')).toContain(start.label === 'counter' ? 'there are two' : 'the plan holds')
      expect(end.usage!.outputTokens).toBeGreaterThan(0)
    }
  })
})
