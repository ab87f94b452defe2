import { spawn } from 'node:child_process'
import { readFileSync, readdirSync, writeFileSync } from 'node:fs'
import { join } from 'node:path'
import { describe, expect, it } from 'vitest'
import { dshBin, repoRoot, tempDir } from './cli.js'

const CONFIG = [
  '- id: tool-subagent-keep',
  '  name: "@dsh/tool-subagent"',
  '  config: { provider: spawn, toolName: subagent_keep, backgroundMode: continuable }',
].join('\n')

/** In one turn the parent starts a slow continuable child and at once queues it a second message. */
const SCRIPT = [
  '- when: { prompt: "^slow work" }',
  '  reply:',
  '    - { text: "first answer", delay_ms: 15000 }',
  '    - { text: "second answer", delay_ms: 15000 }',
  '- when: { depth: 0 }',
  '  reply:',
  '    - call: { tool: subagent_keep, args: { description: slow, prompt: "slow work", run_in_background: true } }',
  '    - call: { tool: send_message, args: { subagent_id: slow, message: "and then more" } }',
  '    - text: "waiting"',
  '    - text: "a notice turn"',
].join('\n')

interface Event {
  type?: string
  reason?: string
  message?: { content: { type: string; text?: string }[] }
}

const eventsOf = (file: string): Event[] => readFileSync(file, 'utf8').trim().split('\n').slice(1).map((line) => JSON.parse(line) as Event)
const userTexts = (file: string) => eventsOf(file).filter((event) => event.type === 'user/message').map((event) => event.message!.content.map((block) => block.text ?? '').join(''))
const turnEnds = (file: string) => eventsOf(file).flatMap((event) => (event.type === 'turn/end' ? [event.reason] : []))

describe('dsh run cancelled while a continuable child has a queued message', () => {
  it('Ctrl-C drops the queued message, ends the child\'s turn aborted, and starts no parent turn after the cancel', async () => {
    const dir = tempDir()
    const config = join(dir, 'dsh.yml')
    const script = join(dir, 'script.yml')
    writeFileSync(config, CONFIG)
    writeFileSync(script, SCRIPT)
    const child = spawn(process.execPath, [dshBin, 'run', '--config', config, '--model', `scripted:${script}`, '--session-dir', dir, 'go'], { cwd: repoRoot, env: { ...process.env, DSH_HOME: dir }, stdio: ['ignore', 'pipe', 'pipe'] })
    let stdout = ''
    let stderr = ''
    child.stdout.on('data', (chunk: Buffer) => (stdout += chunk))
    child.stderr.on('data', (chunk: Buffer) => (stderr += chunk))
    const exited = new Promise<number | null>((resolve) => child.on('close', (code) => resolve(code)))
    await new Promise<void>((resolve, reject) => {
      const check = () => {
        // In the parent's session file: stdout gets the answer only when the run ends.
        const parentWaiting = readdirSync(dir).some((name) => name.endsWith('.jsonl') && readFileSync(join(dir, name), 'utf8').includes('waiting'))
        if (parentWaiting) resolve()
        else if (child.exitCode !== null) reject(new Error(`dsh exited early:\n${stderr}`))
        else setTimeout(check, 50)
      }
      check()
    })
    child.kill('SIGINT')
    expect(await exited).toBe(130)

    const files = readdirSync(dir).filter((name) => name.endsWith('.jsonl')).map((name) => join(dir, name))
    expect(files).toHaveLength(2)
    const childFile = files.find((file) => readFileSync(file, 'utf8').includes('"descriptor"'))!
    const parentFile = files.find((file) => file !== childFile)!
    // The queued message never ran: the child took one turn, stopped by the cancel.
    expect(userTexts(childFile)).toEqual(['slow work'])
    expect(turnEnds(childFile)).toEqual(['aborted'])
    // The parent's log: its one prompt and no notice; it ends with the cancel (its turn aborted,
    // or, when the signal came just after that turn ended, a step-less aborted turn).
    expect(userTexts(parentFile)).toEqual(['go'])
    expect(turnEnds(parentFile).at(-1)).toBe('aborted')
    expect(stdout).not.toContain('a notice turn')
  })
})
