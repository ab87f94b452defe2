/**
 * A parent `dsh run` keeping a continuable child on a `dsh a2a serve` worker: the child is
 * an A2A context, each of its turns a task of that context, and the worker keeps the
 * context's conversation in one session. After the parent's process exits, `dsh run
 * --resume` continues the same context. Everything is real (both CLIs, the HTTP between
 * them, both session stores); the model is the scripted one, whose resumed sessions
 * continue their rule.
 */
import { readdirSync, readFileSync, writeFileSync } from 'node:fs'
import { join } from 'node:path'
import { randomUUID } from 'node:crypto'
import { describe, expect, it } from 'vitest'
import { Role } from '@a2a-js/sdk'
import { ClientFactory, DefaultAgentCardResolver, JsonRpcTransportFactory } from '@a2a-js/sdk/client'
import { runDsh, tempDir } from './cli.js'
import { serve } from './a2a-serve-process.js'

interface Event {
  type?: string
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

function sessionFiles(dir: string): string[] {
  return readdirSync(dir).filter((name) => name.endsWith('.jsonl')).map((name) => join(dir, name))
}

/** The `a2a` provider listing the worker, and a continuable delegation tool bound to it. */
function config(dir: string, url: string): string {
  const file = join(dir, 'dsh.yml')
  writeFileSync(file, [
    '- id: subagent-a2a',
    '  name: "@dsh/subagent-a2a"',
    `  config: { urls: [${url}] }`,
    '- id: tool-subagent-keep',
    '  name: "@dsh/tool-subagent"',
    '  config: { provider: a2a, toolName: subagent_keep, backgroundMode: continuable }',
  ].join('\n'))
  return file
}

describe('dsh run with a continuable child on a dsh a2a serve worker', () => {
  it('keeps the A2A context across turns and across a restart of the parent: the worker holds one conversation of three turns', async () => {
    const workerDir = tempDir()
    const script = join(workerDir, 'worker.yml')
    // The child: its first turn calls a tool (one without side effects, which a worker
    // runs with nobody to ask; its answer names the marker); later turns quote the latest
    // tool result of their history, which only the first turn has: it is there only if the
    // history is.
    writeFileSync(script, [
      '- when: { prompt: "^research" }',
      '  reply:',
      '    - call: { tool: task_output, args: { task_id: "marker-from-turn-one" } }',
      '    - text: "child turn one"',
      '    - text: "child turn two recalls {{last_tool_result}}"',
      '    - text: "child turn three recalls {{last_tool_result}}"',
    ].join('\n'))
    const served = await serve(['--model', `scripted:${script}`, '--session-dir', workerDir])

    const dir = tempDir()
    const parentScript = join(dir, 'parent.yml')
    writeFileSync(parentScript, [
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
    const common = ['--config', config(dir, served.url), '--model', `scripted:${parentScript}`, '--session-dir', dir]

    const first = await runDsh(['run', '--json', ...common, 'start a researcher'], { timeoutMs: 60_000 })
    expect(first.stderr).toBe('')
    expect(first.code).toBe(0)
    const parentId = (first.stdout.trim().split('\n').map((line) => JSON.parse(line) as { kind: string; header?: { id: string } }).find((line) => line.kind === 'session/header')!.header!).id
    const parentFile = join(dir, `${parentId}.jsonl`)
    // Both settled turns of the child reached the parent as notices, with their closing messages.
    const heard = userTexts(parentFile)
    expect(heard[1]).toContain('child turn one')
    expect(heard[2]).toContain('child turn two recalls')
    expect(heard[2]).toContain('marker-from-turn-one')

    const [childFile, ...others] = sessionFiles(workerDir).filter((file) => headerOf(file).origin === 'a2a')
    expect(others).toEqual([])
    expect(headerOf(childFile!).parentSession).toBe(parentId)
    expect(userTexts(childFile!)).toEqual(['research the repo', 'dig deeper'])

    const second = await runDsh(['run', ...common, '--resume', parentId, 'ask it once more'], { timeoutMs: 60_000 })
    expect(second.code).toBe(0)
    expect(second.stdout).toContain('noted round three')
    // The same context continued: its third turn saw the first turn's tool result.
    const closing = userTexts(parentFile).at(-1)!
    expect(closing).toContain('child turn three recalls')
    expect(closing).toContain('marker-from-turn-one')

    // One conversation on the worker: one session, three turns, nothing else made there.
    expect(sessionFiles(workerDir).filter((file) => headerOf(file).origin === 'a2a')).toEqual([childFile])
    expect(userTexts(childFile!)).toEqual(['research the repo', 'dig deeper', 'one more thing'])
    expect(eventsOf(childFile!).filter((event) => event.type === 'turn/start')).toHaveLength(3)

    const tree = await runDsh(['sessions', 'tree', parentId, '--session-dir', dir])
    expect(tree.code).toBe(0)
    const lines = tree.stdout.trim().split('\n')
    expect(lines).toHaveLength(2)
    expect(lines[1]).toMatch(/^└─ \S+ .*continuable: 3 turns, idle$/)
  })

  it('a message naming a context the worker does not know, which a dsh parent says must exist, is refused with an error, and no session is made', async () => {
    const workerDir = tempDir()
    const served = await serve(['--model', 'scripted:examples/acp-child.yml', '--session-dir', workerDir])
    const client = await new ClientFactory({ transports: [new JsonRpcTransportFactory({ fetchImpl: fetch })], cardResolver: new DefaultAgentCardResolver({ fetchImpl: fetch }) }).createFromUrl(served.url)
    const contextId = randomUUID()
    const metadata = { dsh: { parentSession: 'a-parent', delegationDepth: 1, provider: 'a2a', existingContext: true } }
    const message = { messageId: randomUUID(), contextId, taskId: '', role: Role.ROLE_USER, parts: [{ content: { $case: 'text' as const, value: 'hello' }, metadata: undefined, filename: '', mediaType: 'text/plain' }], metadata, extensions: [], referenceTaskIds: [] }
    await expect(client.sendMessage({ tenant: '', message, configuration: undefined, metadata: undefined })).rejects.toThrow(new RegExp(`this worker has no context ${contextId}.*to start a new one`))
    expect(sessionFiles(workerDir)).toEqual([])
  })
})
