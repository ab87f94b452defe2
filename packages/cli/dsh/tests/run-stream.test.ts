/**
 * `dsh run`'s text as it arrives, through the built CLI and a pipe. The model is testkit's
 * fake OpenAI server, told to send the first piece of its answer and then hold the rest:
 * the turn cannot end until the test lets it, so a piece read while it holds arrived
 * before the end, whatever the machine's speed. The test then cancels with SIGINT.
 */
import { spawn } from 'node:child_process'
import { writeFileSync } from 'node:fs'
import { join } from 'node:path'
import { afterEach, describe, expect, it } from 'vitest'
import { startFakeOpenAIChat, type FakeOpenAIChat } from '@dsh/testkit'
import { dshBin, repoRoot, runDsh, tempDir } from './cli.js'
import { until } from './processes.js'

let fake: FakeOpenAIChat | undefined
afterEach(async () => {
  await fake?.close()
  fake = undefined
})

/** An OpenAI-compatible adapter named `fake` pointed at the fake server. */
function fakeModelConfig(dir: string, server: FakeOpenAIChat): string {
  const file = join(dir, 'dsh.yml')
  writeFileSync(file, ['- id: llm-fake', '  name: "@dsh/llm-openai"', `  config: { name: fake, baseURL: "${server.url}", apiKeyEnv: FAKE_MODEL_AUTH, model: fake-model }`].join('\n'))
  return file
}

/** `dsh run ARGS` with its stdout read as it comes. */
function startRun(dir: string, args: string[]) {
  const child = spawn(process.execPath, [dshBin, 'run', ...args], {
    cwd: repoRoot,
    env: { ...process.env, DSH_HOME: dir, DEEPSEEK_API_KEY: '', OPENAI_API_KEY: '', FAKE_MODEL_AUTH: 'loopback' },
    stdio: ['ignore', 'pipe', 'pipe'],
  })
  const run = { stdout: '', stderr: '', exit: undefined as number | null | undefined }
  child.stdout.on('data', (chunk: Buffer) => (run.stdout += chunk.toString('utf8')))
  child.stderr.on('data', (chunk: Buffer) => (run.stderr += chunk.toString('utf8')))
  const exited = new Promise<number | null>((resolve) => child.on('close', (code) => resolve((run.exit = code))))
  const ended = () => (run.exit !== undefined ? `dsh exited ${run.exit} first; stdout: ${run.stdout}; stderr: ${run.stderr}` : undefined)
  return { run, exited, ended, interrupt: () => child.kill('SIGINT') }
}

/** The first piece of an answer, then the stream held open until the run is cancelled. */
const HELD = { text: ['first piece ', 'and the rest of the answer'], hangAfterChunks: 2 }

describe('dsh run streams the root\'s text into a pipe', () => {
  it('--stream: the first piece is on stdout while the model still holds the rest of its answer', async () => {
    const dir = tempDir()
    fake = await startFakeOpenAIChat([HELD])
    const { run, exited, ended, interrupt } = startRun(dir, ['--stream', '--quiet', '--config', fakeModelConfig(dir, fake), '--model', 'fake', '--session-dir', dir, 'hi'])
    await until(() => run.stdout.includes('first piece'), ended)
    // The model has not sent the rest: the turn is still running and nothing else was written.
    expect(run.exit).toBeUndefined()
    expect(run.stdout).toBe('first piece ')
    interrupt()
    expect(await exited).toBe(130)
    expect(run.stdout).toBe('first piece \n')
  })

  it('--json: a text/delta record for the first piece arrives before the turn ends and before the answer record', async () => {
    const dir = tempDir()
    fake = await startFakeOpenAIChat([HELD])
    const { run, exited, ended, interrupt } = startRun(dir, ['--json', '--config', fakeModelConfig(dir, fake), '--model', 'fake', '--session-dir', dir, 'hi'])
    const records = () => run.stdout.split('\n').filter((line) => line.endsWith('}')).map((line) => JSON.parse(line) as { kind: string; text?: string; event?: { type: string } })
    await until(() => records().some((record) => record.kind === 'text/delta'), ended)
    expect(records().filter((record) => record.kind === 'text/delta')).toEqual([{ kind: 'text/delta', session: expect.any(String), text: 'first piece ' }])
    expect(records().some((record) => record.event?.type === 'turn/end' || record.kind === 'answer')).toBe(false)
    expect(run.exit).toBeUndefined()
    interrupt()
    expect(await exited).toBe(130)
  })

  it('--json: the deltas of a scripted answer come in order before its assistant/message and add up to it', async () => {
    const dir = tempDir()
    const script = join(dir, 'script.yml')
    writeFileSync(script, '- reply:\n    - text: "several words make several pieces of one answer"\n')
    const result = await runDsh(['run', '--json', '--model', `scripted:${script}`, '--session-dir', dir, 'hi'])
    expect(result.code, result.stderr).toBe(0)
    const records = result.stdout.trim().split('\n').map((line) => JSON.parse(line) as { kind: string; text?: string; event?: { type: string } })
    const deltas = records.flatMap((record, index) => (record.kind === 'text/delta' ? [{ index, text: record.text! }] : []))
    expect(deltas.length).toBeGreaterThan(1)
    expect(deltas.map((delta) => delta.text).join('')).toBe('several words make several pieces of one answer')
    const message = records.findIndex((record) => record.event?.type === 'assistant/message')
    expect(deltas.every((delta) => delta.index < message)).toBe(true)
    expect(records.at(-1)).toMatchObject({ kind: 'answer', text: 'several words make several pieces of one answer' })
  })

  it('--stream: a step that went on to call a tool ends its line; every piece of text is on stdout, newline-terminated', async () => {
    const dir = tempDir()
    const script = join(dir, 'script.yml')
    writeFileSync(script, ['- reply:', '    - text: "Let me check first."', '      call: { tool: bash, args: { command: "true" } }', '    - text: "FINAL ANSWER"', ''].join('\n'))
    const result = await runDsh(['run', '--stream', '--permission', 'allow', '--model', `scripted:${script}`, '--session-dir', dir, 'check then answer'])
    expect(result.code, result.stderr).toBe(0)
    expect(result.stdout).toBe('Let me check first.\nFINAL ANSWER\n')
  })

  it('in a pipe nothing is coloured, whatever the terminal would get: no escape code on stdout or stderr', async () => {
    const dir = tempDir()
    const script = join(dir, 'script.yml')
    writeFileSync(script, [
      '- when: { depth: 1 }',
      '  reply:',
      '    - call: { tool: bash, args: { command: "echo child" } }',
      '    - error: "the child failed"',
      '- when: { depth: 0 }',
      '  reply:',
      '    - call: { tool: subagent, args: { description: "helper", prompt: "help" } }',
      '    - text: "done anyway"',
    ].join('\n'))
    for (const env of [{}, { NO_COLOR: '1' }]) {
      const result = await runDsh(['run', '--permission', 'allow', '--config', join(repoRoot, 'examples/delegate.yml'), '--model', `scripted:${script}`, '--session-dir', dir, 'go'], { env })
      expect(result.code, result.stderr).toBe(0)
      // Progress lines were written (a child started, called a tool, failed), none of them painted.
      expect(result.stderr).toContain('[subagent] end spawn')
      expect(result.stdout + result.stderr).not.toContain('\x1b')
    }
  })
})
