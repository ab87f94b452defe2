/**
 * What a user of `dsh run` meets in the first hour: who decides about commands when no one
 * is at a terminal, resuming a session as it ran, help for each verb, flags over files,
 * and `sessions list` laid out in columns.
 */
import { existsSync, readdirSync, readFileSync, writeFileSync } from 'node:fs'
import { join } from 'node:path'
import { describe, expect, it } from 'vitest'
import { repoRoot, runDsh, tempDir } from './cli.js'

function script(dir: string, lines: string[]): string {
  const file = join(dir, 'script.yml')
  writeFileSync(file, lines.join('\n'))
  return file
}

describe('side-effecting tools without a terminal', () => {
  const touching = (dir: string) => script(dir, ['- reply:', `    - call: { tool: bash, args: { command: "touch ${join(dir, 'ran')}" } }`, '    - text: "after: {{last_tool_result}}"'])

  it('are refused by default, with one line saying how to allow them; the command does not run', async () => {
    const dir = tempDir()
    const result = await runDsh(['run', '--model', `scripted:${touching(dir)}`, '--session-dir', dir, 'go'])
    expect(result.code, result.stderr).toBe(0)
    expect(existsSync(join(dir, 'ran'))).toBe(false)
    expect(result.stdout).toContain('bash was not run: permission denied by dsh run --permission reject')
    expect(result.stderr).toContain('dsh: bash was not run: nobody is asked when dsh run is not on a terminal, so side effects no rule allows are refused; --permission allow lets them run unasked, and approvals rules in dsh.yml allow some')
  })

  it('run with --permission allow, and the session records who allowed them', async () => {
    const dir = tempDir()
    const result = await runDsh(['run', '--permission', 'allow', '--model', `scripted:${touching(dir)}`, '--session-dir', dir, 'go'])
    expect(result.code, result.stderr).toBe(0)
    expect(existsSync(join(dir, 'ran'))).toBe(true)
    const session = readdirSync(dir).find((name) => name.endsWith('.jsonl'))!
    expect(readFileSync(join(dir, session), 'utf8')).toContain('dsh run --permission allow')
  })

  it('--permission ask without a terminal, or an unknown policy, is one line and exit 2 before any session', async () => {
    for (const [policy, says] of [['ask', '--permission ask needs a terminal'], ['maybe', '--permission must be one of ask, allow, reject (got "maybe")']]) {
      const dir = tempDir()
      const result = await runDsh(['run', '--permission', policy!, '--model', 'scripted:examples/hello.yml', '--session-dir', join(dir, 'sessions'), 'hello'])
      expect(result.code, result.stderr).toBe(2)
      expect(result.stderr.trim().split('\n')).toHaveLength(1)
      expect(result.stderr).toContain(says)
      expect(existsSync(join(dir, 'sessions')) ? readdirSync(join(dir, 'sessions')) : []).toEqual([])
    }
  })
})

describe('--resume', () => {
  it('continues on the model the session ran on, found by a unique tail of its id', async () => {
    const dir = tempDir()
    const model = script(dir, ['- reply: [{ text: "first answer" }, { text: "second answer" }]'])
    const first = await runDsh(['run', '--model', `scripted:${model}`, '--session-dir', dir, 'one'])
    expect(first.code, first.stderr).toBe(0)
    const id = readdirSync(dir).find((name) => name.endsWith('.jsonl'))!.replace(/\.jsonl$/, '')
    const second = await runDsh(['run', '--resume', id.slice(-7), '--session-dir', dir, 'two'])
    expect(second.code, second.stderr).toBe(0)
    expect(second.stdout).toContain('second answer')
    expect(readdirSync(dir).filter((name) => name.endsWith('.jsonl'))).toHaveLength(1)
  })

  it('--model overrides the recorded one; a session whose model cannot be used says so and how to go on', async () => {
    const dir = tempDir()
    const model = script(dir, ['- reply: [{ text: "first answer" }]'])
    await runDsh(['run', '--model', `scripted:${model}`, '--session-dir', dir, 'one'])
    const id = readdirSync(dir).find((name) => name.endsWith('.jsonl'))!.replace(/\.jsonl$/, '')
    const otherModel = join(dir, 'other.yml')
    writeFileSync(otherModel, '- reply: [{ text: "unused" }, { text: "from the other model" }]')
    const other = await runDsh(['run', '--resume', id, '--model', `scripted:${otherModel}`, '--session-dir', dir, 'two'])
    expect(other.code, other.stderr).toBe(0)
    expect(other.stdout).toContain('from the other model')
    // It last ran on the other model: that is the one it goes on with, and it is broken now.
    writeFileSync(otherModel, 'not: [a script')
    const broken = await runDsh(['run', '--resume', id, '--session-dir', dir, 'three'])
    expect(broken.code).toBe(2)
    expect(broken.stderr).toContain(`dsh run: session ${id} ran on scripted:${otherModel}, which cannot be used here: `)
    expect(broken.stderr).toContain('pass --model SPEC to go on with another')
  })

  it('an unknown session is reported before the missing model, and the no-model hint names llm.model', async () => {
    const dir = tempDir()
    const unknown = await runDsh(['run', '--resume', 'nope', '--session-dir', dir, 'x'])
    expect(unknown.code).toBe(2)
    expect(unknown.stderr).toContain('dsh run: no stored session nope')
    const noModel = await runDsh(['run', '--session-dir', dir, 'x'])
    expect(noModel.code).toBe(2)
    expect(noModel.stderr).toContain('set llm.model in dsh.yml')
  })
})

describe('the command line', () => {
  it('every verb answers --help and -h with its own usage, exit 0', async () => {
    for (const verb of ['run', 'demo', 'acp', 'a2a', 'sessions', 'config', 'trust']) {
      for (const flag of ['--help', '-h']) {
        const result = await runDsh([verb, flag])
        expect(result.code, `${verb} ${flag}: ${result.stderr}`).toBe(0)
        expect(result.stdout.startsWith(`usage: dsh ${verb} `)).toBe(true)
      }
    }
  })

  it('--model wins over the config file\'s llm.model', async () => {
    const dir = tempDir()
    const config = join(dir, 'dsh.yml')
    writeFileSync(config, `- id: llm\n  name: "@dsh/llm"\n  config: { model: "scripted:${script(dir, ['- reply: [{ text: "from the file" }]'])}" }\n`)
    const fromFile = await runDsh(['run', '--config', config, '--session-dir', dir, 'hello'])
    expect(fromFile.stdout).toContain('from the file')
    const fromFlag = await runDsh(['run', '--config', config, '--model', 'scripted:examples/hello.yml', '--session-dir', dir, 'hello'])
    expect(fromFlag.stdout).toContain('Hello!')
  })

  it('a problem with --model is not blamed on the config file; a problem in one of its entries is', async () => {
    const dir = tempDir()
    const config = join(dir, 'dsh.yml')
    writeFileSync(config, '- id: tasks\n  name: "@dsh/tasks"\n')
    const result = await runDsh(['run', '--config', config, '--model', 'nope:x', '--session-dir', dir, 'hello'])
    expect(result.code).toBe(2)
    expect(result.stderr.trim()).toBe('dsh: model spec "nope:x" names adapter "nope", which is not loaded (loaded: scripted, deepseek, openai, anthropic, replay)')
    writeFileSync(config, '- id: tasks\n  name: "@dsh/tasks"\n  config: { maxLiveTasksPerOwner: -1 }\n')
    const blamed = await runDsh(['run', '--config', config, '--model', 'scripted:examples/hello.yml', '--session-dir', dir, 'hello'])
    expect(blamed.code).toBe(2)
    expect(blamed.stderr).toContain(`dsh: config ${config}: plugin "tasks" (@dsh/tasks): invalid config: `)
  })

  it('sessions list aligns its columns when ids differ in length', async () => {
    const dir = tempDir()
    await runDsh(['run', '--model', 'scripted:examples/hello.yml', '--session-dir', dir, 'hello'])
    const [file] = readdirSync(dir).filter((name) => name.endsWith('.jsonl'))
    const id = file!.replace(/\.jsonl$/, '')
    const longer = `${id}-from-an-acp-client`
    writeFileSync(join(dir, `${longer}.jsonl`), readFileSync(join(dir, file!), 'utf8').replace(`"id":"${id}"`, `"id":"${longer}"`), { mode: 0o600 })
    const list = await runDsh(['sessions', 'list', '--session-dir', dir])
    expect(list.code, list.stderr).toBe(0)
    const lines = list.stdout.trim().split('\n')
    expect(lines).toHaveLength(2)
    const dateColumn = lines.map((line) => line.search(/\d{4}-\d\d-\d\d /))
    expect(dateColumn[0]).toBe(dateColumn[1])
    const promptColumn = lines.map((line) => line.indexOf('hello'))
    expect(promptColumn[0]).toBe(promptColumn[1])
  })
})

describe('children store their sessions beside their parent\'s', () => {
  it('a dsh acp child of dsh run --session-dir D writes its session in D, and sessions tree in D shows it', async () => {
    const dir = tempDir()
    const result = await runDsh(['run', '--session-dir', dir, '--config', join(repoRoot, 'examples/acp.yml'), '--model', 'scripted:examples/acp-parent.yml', 'ask the ACP child about France'])
    expect(result.code, result.stderr).toBe(0)
    expect(readdirSync(dir).filter((name) => name.endsWith('.jsonl'))).toHaveLength(2)
    const tree = await runDsh(['sessions', 'tree', '--session-dir', dir])
    expect(tree.stdout).toMatch(/└─ \S+ {2}acp "ask about France" {2}completed/)
  })
})

describe('paths in a config file', () => {
  it('examples/acp.yml works from any directory: its relative cwd is relative to the file', async () => {
    const elsewhere = tempDir()
    const result = await runDsh(['run', '--quiet', '--session-dir', elsewhere, '--config', join(repoRoot, 'examples/acp.yml'), '--model', `scripted:${join(repoRoot, 'examples/acp-parent.yml')}`, 'ask the ACP child about France'], { cwd: elsewhere })
    expect(result.code, result.stderr).toBe(0)
    expect(result.stdout).toContain('The ACP child answered: Paris is the capital of France.')
  })

  it('a relative session directory in a config file is relative to the file, not to where dsh runs', async () => {
    const dir = tempDir()
    writeFileSync(join(dir, 'dsh.yml'), '- id: session-jsonl\n  name: "@dsh/session-jsonl"\n  config: { dir: stored }\n')
    const elsewhere = tempDir()
    const result = await runDsh(['run', '--config', join(dir, 'dsh.yml'), '--model', `scripted:${join(repoRoot, 'examples/hello.yml')}`, 'hello'], { cwd: elsewhere })
    expect(result.code, result.stderr).toBe(0)
    expect(readdirSync(join(dir, 'stored')).filter((name) => name.endsWith('.jsonl'))).toHaveLength(1)
    expect(existsSync(join(elsewhere, 'stored'))).toBe(false)
  })
})
