import { cpSync, readFileSync, readdirSync, rmSync, writeFileSync } from 'node:fs'
import { join } from 'node:path'
import { describe, expect, it } from 'vitest'
import { repoRoot, runDsh, tempDir } from './cli.js'
import { expectedOf, listScenarios, runScenario } from './scenario-runner.js'

describe('dsh run --record and --model replay:DIR', () => {
  it('the nested run recorded against the fake OpenAI server (three concurrent spawn children and a fork child) replays without it twenty times: identical stdout and normalised session logs', async () => {
    const scenario = listScenarios().find((candidate) => candidate.name === 'nested-openai')!
    const expected = expectedOf(scenario)!
    expect(Object.keys(expected.sessions).sort()).toEqual(['root', 'root.call_docs', 'root.call_notes', 'root.call_review', 'root.call_tests'])
    for (let batch = 0; batch < 5; batch++) {
      const outcomes = await Promise.all([0, 1, 2, 3].map(() => runScenario(scenario, 'replay')))
      for (const outcome of outcomes) {
        expect(outcome.code, outcome.stderr).toBe(0)
        expect(outcome.stdout).toBe(expected.stdout)
        expect(outcome.sessions).toEqual(expected.sessions)
      }
    }
  })

  it('one word changed in a child\'s prompt in the recording fails the replay, naming the session, the call and the field with both values', async () => {
    const dir = tempDir()
    cpSync(join(repoRoot, 'scenarios/nested-openai'), dir, { recursive: true })
    const root = join(dir, 'recording/root.jsonl')
    writeFileSync(root, readFileSync(root, 'utf8').replace('check the tests for the release', 'check the benchmarks for the release'))
    const result = await runDsh(['run', '--quiet', '--config', 'config.yml', '--model', 'replay:recording', '--session-dir', join(dir, 'sessions'), 'plan the release'], { cwd: dir })
    expect(result.code).toBe(1)
    expect(result.stderr).toContain(`dsh: replay diverged: session root.call_tests, call 0: prompt differs: recorded "check the tests for the release", live "check the benchmarks for the release" (${join(dir, 'recording/root.call_tests.jsonl')}:1)`)
  })

  it('--record stores one readable file per session named by lineage, and replaying it prints the same answer', async () => {
    const dir = tempDir()
    const recording = join(dir, 'recording')
    const args = ['--config', join(repoRoot, 'examples/delegate.yml'), 'review the plan']
    const recorded = await runDsh(['run', '--quiet', '--model', `scripted:${join(repoRoot, 'examples/delegate-script.yml')}`, '--record', recording, '--session-dir', join(dir, 'a'), ...args])
    expect(recorded.code, recorded.stderr).toBe(0)
    expect(readdirSync(recording).sort()).toEqual(['root.call_1.jsonl', 'root.call_2.jsonl', 'root.jsonl'])
    const child = readFileSync(join(recording, 'root.call_1.jsonl'), 'utf8').trim().split('\n').map((line) => JSON.parse(line) as Record<string, unknown>)
    expect(child[0]).toEqual({ recording: 'dsh-llm-recording', version: 1, session: 'root.call_1', parent: 'root', toolCallId: 'call_1', prompt: 'list the risks of the plan' })
    expect(child[1]).toMatchObject({ call: 0, request: { model: expect.any(String), system: expect.any(String), messages: { keep: 0, add: [{ role: 'user' }] } } })
    expect(child[2]).toMatchObject({ call: 0, response: { end: 'finish', chunks: expect.arrayContaining([{ type: 'finish', reason: 'stop' }]) } })
    const replayed = await runDsh(['run', '--quiet', '--model', `replay:${recording}`, '--session-dir', join(dir, 'b'), ...args])
    expect(replayed.code, replayed.stderr).toBe(0)
    expect(replayed.stdout).toBe(recorded.stdout)
  })

  it("the approval broker's decisions are recorded beside the model calls and a replay reproduces them without asking anyone; a request the recording never decided is a divergence and does not run", async () => {
    const dir = tempDir()
    const recording = join(dir, 'recording')
    const script = join(dir, 'script.yml')
    writeFileSync(script, [
      '- when: { prompt: "tidy up" }',
      '  reply:',
      `    - call: { tool: bash, args: { command: "touch ${join(dir, 'child-ran')}" } }`,
      '    - text: "child: {{last_tool_result}}"',
      '- when: { depth: 0 }',
      '  reply:',
      '    - call: { tool: subagent, args: { description: "tidier", prompt: "tidy up" } }',
      `    - call: { tool: bash, args: { command: "touch ${join(dir, 'root-ran')}" } }`,
      '    - text: "done: {{last_tool_result}}"',
    ].join('\n'))
    // Recorded with nobody to ask but everything allowed: the decisions are the default's.
    const recorded = await runDsh(['run', '--quiet', '--permission', 'allow', '--model', `scripted:${script}`, '--record', recording, '--session-dir', join(dir, 'a'), 'go'])
    expect(recorded.code, recorded.stderr).toBe(0)
    const childLines = readFileSync(join(recording, 'root.call_1.jsonl'), 'utf8').trim().split('\n').map((line) => JSON.parse(line) as Record<string, unknown>)
    expect(childLines.find((line) => line.approval !== undefined)).toEqual({ approval: 0, request: { tool: 'bash', subject: `touch ${join(dir, 'child-ran')}` }, decision: { decision: 'allow-once', by: 'dsh run --permission allow', source: 'default', at: expect.any(Number) } })
    rmSync(join(dir, 'child-ran'))
    rmSync(join(dir, 'root-ran'))
    // Replayed where the default would refuse: the recorded decisions hold, nobody is asked.
    const replayed = await runDsh(['run', '--quiet', '--permission', 'reject', '--model', `replay:${recording}`, '--session-dir', join(dir, 'b'), 'go'])
    expect(replayed.code, replayed.stderr).toBe(0)
    expect(replayed.stdout).toBe(recorded.stdout)
    expect(readdirSync(dir)).toEqual(expect.arrayContaining(['child-ran', 'root-ran']))
    const replayedRoot = readdirSync(join(dir, 'b')).map((name) => readFileSync(join(dir, 'b', name), 'utf8')).join('\n')
    expect(replayedRoot).toContain('"source":"replay"')
    // A recording whose decision is missing: the request is refused and the replay fails naming it.
    rmSync(join(dir, 'child-ran'))
    const child = join(recording, 'root.call_1.jsonl')
    writeFileSync(child, readFileSync(child, 'utf8').split('\n').filter((line) => !line.startsWith('{"approval"')).join('\n'))
    const diverged = await runDsh(['run', '--quiet', '--permission', 'allow', '--model', `replay:${recording}`, '--session-dir', join(dir, 'c'), 'go'])
    expect(diverged.code).toBe(1)
    expect(diverged.stderr).toContain('replay diverged: session root.call_1 asked to run bash')
    expect(readdirSync(dir)).not.toContain('child-ran')
  })

  it('--record together with --model replay:DIR is a usage error before any session', async () => {
    const dir = tempDir()
    const result = await runDsh(['run', '--model', `replay:${join(repoRoot, 'scenarios/spawn/recording')}`, '--record', join(dir, 'r'), '--session-dir', join(dir, 's'), 'hi'])
    expect(result.code).toBe(2)
    expect(result.stderr.trim().split('\n')).toHaveLength(1)
    expect(result.stderr).toContain('exclude each other')
  })

  it('a replay directory that does not exist is a usage error before any session', async () => {
    const dir = tempDir()
    const result = await runDsh(['run', '--model', `replay:${join(dir, 'nope')}`, '--session-dir', join(dir, 's'), 'hi'])
    expect(result.code).toBe(2)
    expect(result.stderr.trim().split('\n')).toHaveLength(1)
    expect(result.stderr).toContain(`${join(dir, 'nope')} is not a directory of recordings`)
  })

  describe('a dsh acp child of a recorded parent', () => {
    function acpScenarioCopy(): string {
      const dir = tempDir()
      cpSync(join(repoRoot, 'scenarios/acp-child'), dir, { recursive: true })
      const config = join(dir, 'config.yml')
      writeFileSync(config, readFileSync(config, 'utf8').replace('../../packages/cli/dsh/dist/main.js', join(repoRoot, 'packages/cli/dsh/dist/main.js')))
      return dir
    }
    const replay = (dir: string) => runDsh(['run', '--quiet', '--config', 'config.yml', '--model', 'replay:recording', '--session-dir', join(dir, 'sessions'), 'ask the ACP child about France'], { cwd: dir })

    it('replays its own recording in its own process, not its configured model', async () => {
      const dir = acpScenarioCopy()
      writeFileSync(join(dir, 'child.yml'), '- reply:\n    - text: "Lyon, says the live script."\n')
      const result = await replay(dir)
      expect(result.code, result.stderr).toBe(0)
      expect(result.stdout).toBe('The ACP child answered: Paris is the capital of France.\n')
    })

    it('without its recording the child fails and the replay says so, naming the missing file', async () => {
      const dir = acpScenarioCopy()
      rmSync(join(dir, 'recording/root.call_1.jsonl'))
      const result = await replay(dir)
      expect(result.code).toBe(1)
      expect(result.stderr).toContain('replay diverged: session root, call 1')
      const childSession = readdirSync(join(dir, 'sessions')).map((name) => readFileSync(join(dir, 'sessions', name), 'utf8')).join('\n')
      expect(childSession).toContain(`there is no recording ${join(dir, 'recording/root.call_1.jsonl')}`)
    })
  })
})
