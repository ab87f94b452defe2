import { spawn } from 'node:child_process'
import { readFileSync, readdirSync, writeFileSync } from 'node:fs'
import { join } from 'node:path'
import { describe, expect, it } from 'vitest'
import { dshBin, repoRoot, runDsh, tempDir } from './cli.js'

/** A deployment with a continuable delegation tool beside the default one-shot `subagent`. */
const CONFIG = [
  '- id: tool-subagent-keep',
  '  name: "@dsh/tool-subagent"',
  '  config: { provider: spawn, toolName: subagent_keep, backgroundMode: continuable }',
].join('\n')

/**
 * One rule per session kind, replies running across both process runs: a resumed session
 * continues its rule after the replies its log holds.
 */
const SCRIPT = [
  '- when: { prompt: "^research" }',
  '  reply:',
  '    - text: "child turn one"',
  '    - text: "child turn two"',
  '    - text: "child turn three"',
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
].join('\n')

interface Line {
  kind: string
  header?: { id: string; parentSession?: string }
  event?: { type: string; reason?: string; message?: { content: { type: string; text?: string }[] } }
}

function userTexts(file: string): string[] {
  return readFileSync(file, 'utf8').trim().split('\n').slice(1).map((line) => JSON.parse(line) as NonNullable<Line['event']>)
    .filter((event) => event.type === 'user/message')
    .map((event) => event.message!.content.map((block) => block.text ?? '').join(''))
}

describe('dsh run with a continuable spawn child', () => {
  it('keeps a child across turns and process runs: notices, follow-ups, a cold resume, one entry in the tree', async () => {
    const dir = tempDir()
    const config = join(dir, 'dsh.yml')
    const script = join(dir, 'script.yml')
    writeFileSync(config, CONFIG)
    writeFileSync(script, SCRIPT)
    const common = ['--config', config, '--model', `scripted:${script}`, '--session-dir', dir]

    const first = await runDsh(['run', '--json', ...common, 'start a researcher'])
    expect(first.stderr).toBe('')
    expect(first.code).toBe(0)
    const lines = first.stdout.trim().split('\n').map((line) => JSON.parse(line) as Line)
    const parentId = lines.find((line) => line.kind === 'session/header')!.header!.id
    const parentFile = join(dir, `${parentId}.jsonl`)
    const childFile = readdirSync(dir).find((name) => name.endsWith('.jsonl') && name !== `${parentId}.jsonl`)!
    const childId = childFile.replace(/\.jsonl$/, '')
    // The parent heard of both settled turns of the child, each with its closing message.
    const heard = userTexts(parentFile)
    expect(heard[0]).toBe('start a researcher')
    expect(heard[1]).toContain(`Subagent ${childId} finished its turn`)
    expect(heard[1]).toContain('child turn one')
    expect(heard[2]).toContain('child turn two')
    expect(userTexts(join(dir, childFile))).toEqual(['research the repo', 'dig deeper'])

    const second = await runDsh(['run', ...common, '--resume', parentId, 'ask it once more'])
    expect(second.code).toBe(0)
    expect(second.stdout).toContain('noted round three')
    // The live view shows the child's turn, and the child idle after it.
    expect(second.stderr).toMatch(new RegExp(`\\[subagent\\] start spawn \\S+ "research"`))
    expect(second.stderr).toMatch(/\[subagent\] end spawn \S+ completed after [\d.]+s, idle/)
    // The child was rebuilt from its file: one session, every turn in order, its script continued.
    expect(userTexts(join(dir, childFile))).toEqual(['research the repo', 'dig deeper', 'one more thing'])
    expect(userTexts(parentFile).at(-1)).toContain('child turn three')
    expect(readdirSync(dir).filter((name) => name.endsWith('.jsonl'))).toHaveLength(2)

    const tree = await runDsh(['sessions', 'tree', parentId, '--session-dir', dir])
    expect(tree.code).toBe(0)
    const treeLines = tree.stdout.trim().split('\n')
    expect(treeLines).toHaveLength(2)
    expect(treeLines[1]).toMatch(new RegExp(`^└─ ${childId}  spawn "research"  completed  continuable: 3 turns, idle$`))
  })

  it('a message to an unknown child is refused to the model and creates nothing', async () => {
    const dir = tempDir()
    const script = join(dir, 'script.yml')
    writeFileSync(script, [
      '- when: { depth: 0 }',
      '  reply:',
      '    - call: { tool: send_message, args: { subagent_id: nobody, message: hi } }',
      '    - text: "the tool said: {{last_tool_result}}"',
    ].join('\n'))
    const result = await runDsh(['run', '--model', `scripted:${script}`, '--session-dir', dir, 'go'])
    expect(result.code).toBe(0)
    expect(result.stdout).toContain('the tool said: message not delivered: subagent nobody cannot be reached: there is no such child')
    expect(readdirSync(dir).filter((name) => name.endsWith('.jsonl'))).toHaveLength(1)
  })
})

describe('dsh run cancelled while a continuable child runs', () => {
  it('Ctrl-C stops the child\'s turn, leaves nothing running, and the child answers the next message after a resume', async () => {
    const dir = tempDir()
    const config = join(dir, 'dsh.yml')
    const script = join(dir, 'script.yml')
    writeFileSync(config, CONFIG)
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
    const common = ['--config', config, '--model', `scripted:${script}`, '--session-dir', dir]
    const child = spawn(process.execPath, [dshBin, 'run', ...common, 'go'], { cwd: repoRoot, env: { ...process.env, DSH_HOME: dir }, stdio: ['ignore', 'pipe', 'pipe'] })
    let stderr = ''
    let stdout = ''
    child.stderr.on('data', (chunk: Buffer) => (stderr += chunk))
    child.stdout.on('data', (chunk: Buffer) => (stdout += chunk))
    const exited = new Promise<number | null>((resolve) => child.on('close', (code) => resolve(code)))
    // The parent has answered ("started it", in its session file: stdout gets the answer
    // only when the run ends) and the child's turn is under way.
    const parentAnswered = () => readdirSync(dir).some((name) => name.endsWith('.jsonl') && readFileSync(join(dir, name), 'utf8').includes('"started it"'))
    await new Promise<void>((resolve, reject) => {
      const check = () => {
        if (/\[subagent\] start spawn \S+ "slow"/.test(stderr) && parentAnswered()) resolve()
        else if (child.exitCode !== null) reject(new Error(`dsh exited early:\n${stderr}`))
        else setTimeout(check, 50)
      }
      check()
    })
    child.kill('SIGINT')
    expect(await exited).toBe(130)
    expect(stderr).toMatch(/\[subagent\] end spawn \S+ aborted/)

    const files = readdirSync(dir).filter((name) => name.endsWith('.jsonl'))
    expect(files).toHaveLength(2)
    const childFile = files.find((name) => readFileSync(join(dir, name), 'utf8').includes('"descriptor"'))!
    const parentFile = files.find((name) => name !== childFile)!
    const lastEnd = (file: string) => readFileSync(join(dir, file), 'utf8').trim().split('\n').map((line) => JSON.parse(line) as { type?: string; reason?: string }).filter((event) => event.type === 'turn/end').at(-1)
    expect(lastEnd(childFile)).toMatchObject({ reason: 'aborted' })
    expect(lastEnd(parentFile)).toMatchObject({ reason: 'aborted' })

    const resumed = await runDsh(['run', ...common, '--resume', parentFile.replace(/\.jsonl$/, ''), 'carry on'])
    expect(resumed.code).toBe(0)
    expect(resumed.stdout).toContain('heard back')
    expect(userTexts(join(dir, childFile))).toEqual(['take forever', 'go on'])
    expect(lastEnd(childFile)).toMatchObject({ reason: 'completed' })
    expect(userTexts(join(dir, parentFile)).at(-1)).toContain('resumed after the interrupt')
  })
})

describe('dsh sessions tree with a remote continuable child', () => {
  /** A stored session file: header and one completed turn per prompt. */
  function storeSession(dir: string, header: Record<string, unknown>, prompts: string[]): void {
    const lines = [JSON.stringify({ kind: 'header', version: 1, header: { createdAt: '2026-01-01T00:00:00.000Z', cwd: dir, ...header } })]
    let seq = 0
    for (const [index, prompt] of prompts.entries()) {
      const turn = index + 1
      lines.push(JSON.stringify({ seq: seq++, ts: 1, type: 'turn/start', turn }))
      lines.push(JSON.stringify({ seq: seq++, ts: 1, type: 'user/message', message: { role: 'user', content: [{ type: 'text', text: prompt }] } }))
      lines.push(JSON.stringify({ seq: seq++, ts: 1, type: 'turn/end', turn, reason: 'completed' }))
    }
    writeFileSync(join(dir, `${String(header.id)}.jsonl`), `${lines.join('\n')}\n`)
  }

  it('shows the child once: the remote session\'s own line carries the parent-side record\'s turns', async () => {
    const dir = tempDir()
    storeSession(dir, { id: 'root-1', origin: 'cli' }, ['go'])
    const descriptor = { version: 1, mode: 'continuable', provider: 'acp', label: 'helper', remote: { remoteId: 'remote-7' } }
    storeSession(dir, { id: 'record-1', parentSession: 'root-1', origin: 'subagent', delegationDepth: 1, provider: 'acp', label: 'helper', descriptor }, ['one', 'two'])
    storeSession(dir, { id: 'remote-7', parentSession: 'root-1', origin: 'acp', delegationDepth: 1, provider: 'acp' }, ['one', 'two'])
    const tree = await runDsh(['sessions', 'tree', 'root-1', '--session-dir', dir])
    expect(tree.code).toBe(0)
    expect(tree.stdout.trim().split('\n')).toEqual([
      'root-1  cli "go"  completed',
      '└─ remote-7  acp "one"  completed  continuable: 2 turns, idle',
    ])
    const listed = await runDsh(['sessions', 'list', '--session-dir', dir])
    expect(listed.stdout).toMatch(/root-1 .* 1 child /)
  })
})
