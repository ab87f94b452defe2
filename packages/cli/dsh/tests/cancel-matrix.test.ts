/**
 * The cancel matrix: SIGINT and SIGTERM, delivered while the work is in a child's model
 * call, in a child's bash command, or in background work after the parent's turn ended,
 * with the child on the spawn provider (same process) and on the acp provider (a `dsh
 * acp` process). Every case must exit 128 + the signal's number, record the cancellation
 * as the root session's last word, and leave no process behind.
 */
import { spawn } from 'node:child_process'
import { readdirSync, readFileSync, writeFileSync } from 'node:fs'
import { constants as osConstants } from 'node:os'
import { join } from 'node:path'
import { describe, expect, it } from 'vitest'
import { dshBin, repoRoot, tempDir } from './cli.js'
import { processesMentioning, until } from './processes.js'

type Stage = 'model' | 'tool' | 'background'
type Provider = 'spawn' | 'acp'
const SIGNALS = ['SIGINT', 'SIGTERM'] as const
const STAGES: Stage[] = ['model', 'tool', 'background']
const PROVIDERS: Provider[] = ['spawn', 'acp']

interface StoredLine {
  kind?: string
  header?: { parentSession?: string }
  type?: string
  reason?: string
}

function readSession(file: string): StoredLine[] {
  return readFileSync(file, 'utf8')
    .split('\n')
    .filter((line) => line.trim())
    .flatMap((line) => {
      try {
        return [JSON.parse(line) as StoredLine]
      } catch {
        // The writer may be mid-line while we look: that line is read on the next look.
        return []
      }
    })
}

function sessions(dir: string): { root?: StoredLine[]; children: StoredLine[][] } {
  const all = readdirSync(dir)
    .filter((name) => name.endsWith('.jsonl'))
    .map((name) => readSession(join(dir, name)))
  return { root: all.find((lines) => lines[0]?.kind === 'header' && !lines[0].header?.parentSession), children: all.filter((lines) => lines[0]?.header?.parentSession) }
}

/** The script both the parent and its child play; the child's rules match its prompt. */
function writeScript(dir: string, stage: Stage, provider: Provider, marker: string): string {
  const tool = provider === 'spawn' ? 'subagent' : 'subagent_acp'
  const background = stage === 'background'
  const file = join(dir, `script-${stage}-${provider}.yml`)
  writeFileSync(file, [
    '- when: { prompt: "^child-model" }',
    '  reply: [{ text: "never", delay_ms: 600000 }]',
    '- when: { prompt: "^child-tool" }',
    '  reply:',
    `    - call: { tool: bash, args: { command: "sleep ${marker}", timeout_ms: 600000 } }`,
    '    - text: "never"',
    '- when: { depth: 0 }',
    '  reply:',
    `    - call: { tool: ${tool}, args: { description: "slow child", prompt: "${stage === 'model' ? 'child-model' : 'child-tool'}", run_in_background: ${background} } }`,
    `    - text: "${background ? 'started in the background' : 'never'}"`,
  ].join('\n'))
  return file
}

function writeAcpConfig(dir: string, script: string): string {
  const file = join(dir, 'acp.yml')
  writeFileSync(file, [
    '- id: subagent-acp',
    '  name: "@dsh/subagent-acp"',
    `  config: { command: ${JSON.stringify(process.execPath)}, args: [${JSON.stringify(dshBin)}, acp, --model, "scripted:${script}", --session-dir, ${JSON.stringify(dir)}], permission: allow }`,
    '- id: tool-subagent-acp',
    '  name: "@dsh/tool-subagent"',
    '  config: { provider: acp, toolName: subagent_acp }',
  ].join('\n'))
  return file
}

/** Poll the files and the process table (not the clock) until the stage is reached. */
async function reached(stage: Stage, dir: string, marker: string, exited: () => boolean): Promise<void> {
  const ready = () => {
    const { root, children } = sessions(dir)
    switch (stage) {
      case 'model':
        return children.some((lines) => lines.some((line) => line.type === 'step/start'))
      case 'tool':
        return processesMentioning(`sleep ${marker}`).length > 0
      case 'background':
        return processesMentioning(`sleep ${marker}`).length > 0 && (root ?? []).some((line) => line.type === 'turn/end' && line.reason === 'completed')
    }
  }
  while (!ready()) {
    if (exited()) throw new Error(`dsh run exited before the ${stage} stage`)
    await new Promise((resolve) => setTimeout(resolve, 25))
  }
}

describe.concurrent('cancel matrix: dsh run', () => {
  let caseNumber = 0
  for (const provider of PROVIDERS) {
    for (const stage of STAGES) {
      for (const signal of SIGNALS) {
        const marker = `${900 + ++caseNumber}.${process.pid}`
        it(`${signal} ${stage === 'background' ? 'while waiting on background work' : `in the child's ${stage === 'model' ? 'model call' : 'bash command'}`} (${provider}): exits ${128 + osConstants.signals[signal]}, the root session ends aborted, no process is left`, async () => {
          const dir = tempDir('dsh-cancel-')
          const script = writeScript(dir, stage, provider, marker)
          const args = ['run', '--permission', 'allow', '--model', `scripted:${script}`, '--session-dir', dir, ...(provider === 'acp' ? ['--config', writeAcpConfig(dir, script)] : []), 'go']
          const run = spawn(process.execPath, [dshBin, ...args], { cwd: repoRoot, env: { ...process.env, DSH_HOME: dir }, stdio: ['ignore', 'pipe', 'pipe'] })
          let stderr = ''
          run.stderr.on('data', (chunk: Buffer) => (stderr += chunk))
          run.stdout.resume()
          let done = false
          const exited = new Promise<number | null>((resolve) => run.on('close', (code) => {
            done = true
            resolve(code)
          }))
          try {
            await reached(stage, dir, marker, () => done)
          } catch (error) {
            throw new Error(`${(error as Error).message}\n${stderr}`)
          }
          run.kill(signal)
          const code = await exited
          expect(code, stderr).toBe(128 + osConstants.signals[signal])
          expect(stderr).toContain('dsh: cancelled')
          const ends = (sessions(dir).root ?? []).filter((line) => line.type === 'turn/end')
          expect(ends.at(-1)?.reason, stderr).toBe('aborted')
          expect(processesMentioning(marker)).toEqual([])
          expect(processesMentioning(script)).toEqual([])
        })
      }
    }
  }
})

describe('a second Ctrl-C with an ACP child', () => {
  it('exits 130 and leaves none of the ACP child\'s own descendants running, even one that ignores SIGTERM', async () => {
    const dir = tempDir('dsh-cancel-')
    const marker = `${950}.${process.pid}`
    const script = join(dir, 'script.yml')
    writeFileSync(script, [
      '- when: { prompt: "^child-tool" }',
      '  reply:',
      `    - call: { tool: bash, args: { command: "trap '' TERM; sleep ${marker}; true", timeout_ms: 600000 } }`,
      '    - text: "never"',
      '- when: { depth: 0 }',
      '  reply:',
      '    - call: { tool: subagent_acp, args: { description: "stubborn child", prompt: "child-tool" } }',
      '    - text: "never"',
    ].join('\n'))
    const args = ['run', '--permission', 'allow', '--model', `scripted:${script}`, '--session-dir', dir, '--config', writeAcpConfig(dir, script), 'go']
    const run = spawn(process.execPath, [dshBin, ...args], { cwd: repoRoot, env: { ...process.env, DSH_HOME: dir }, stdio: ['ignore', 'pipe', 'pipe'] })
    let stderr = ''
    run.stderr.on('data', (chunk: Buffer) => (stderr += chunk))
    run.stdout.resume()
    let done = false
    const exited = new Promise<number | null>((resolve) => run.on('close', (code) => {
      done = true
      resolve(code)
    }))
    await until(() => processesMentioning(`sleep ${marker}`).length > 0, () => (done ? `dsh run exited before the command started:\n${stderr}` : undefined))
    run.kill('SIGINT')
    await until(() => stderr.includes('dsh: cancelling'), () => (done ? `dsh run exited on the first Ctrl-C:\n${stderr}` : undefined))
    run.kill('SIGINT')
    expect(await exited, stderr).toBe(130)
    expect(processesMentioning(marker)).toEqual([])
    expect(processesMentioning(script)).toEqual([])
  })
})
