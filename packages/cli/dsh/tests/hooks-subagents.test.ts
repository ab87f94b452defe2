/**
 * SubagentStop for the whole tree, through the built CLI on a scripted model: the root's
 * hook (the user's own config) writes a record per child that ends, naming its helper and
 * its path from the root, for a spawn child of the root and for a spawn grandchild running
 * below a `dsh acp` child in another process (which has no hooks of its own): the ACP child
 * names its descendants to the root (`_meta.dsh.descendant`), and the root's hooks fire.
 */
import { mkdirSync, readdirSync, readFileSync, realpathSync, writeFileSync } from 'node:fs'
import { join } from 'node:path'
import { describe, expect, it } from 'vitest'
import { dshBin, runDsh, tempDir } from './cli.js'

function write(path: string, text: string): string {
  mkdirSync(join(path, '..'), { recursive: true })
  writeFileSync(path, text)
  return path
}

const helper = (name: string) => ['---', `name: ${name}`, `description: The ${name}.`, '---', `You are the ${name}.`, ''].join('\n')

describe('SubagentStop hooks at the root', () => {
  it('write a record per child with its helper and agent path: a spawn child, and a spawn grandchild of a dsh acp child', async () => {
    const project = realpathSync(tempDir())
    const user = realpathSync(tempDir())
    write(join(project, '.dsh', 'agents', 'checker.md'), helper('checker'))
    write(join(project, '.dsh', 'agents', 'grander.md'), helper('grander'))
    const script = write(join(user, 'script.yml'), [
      '- when: { prompt: "^check work" }',
      '  reply: [{ text: "checked" }]',
      '- when: { prompt: "^grand work" }',
      '  reply: [{ text: "granded" }]',
      '- when: { prompt: "^acp work" }',
      '  reply:',
      '    - call: { tool: subagent, args: { agent: grander, description: grand, prompt: "grand work" } }',
      '    - text: "acp: {{last_tool_result}}"',
      '- when: { depth: 0 }',
      '  reply:',
      '    - call: { tool: subagent, args: { agent: checker, description: check, prompt: "check work" } }',
      '    - call: { tool: subagent_acp, args: { description: remote, prompt: "acp work" } }',
      '    - text: "root: {{tool_results}}"',
    ].join('\n'))
    const log = join(user, 'stops')
    mkdirSync(log)
    // A file per run (the hooks of several ends run at once): the hook's whole input.
    const hook = `cat > "$(mktemp -p ${log})"`
    const childArgs = [dshBin, 'acp', '--model', `scripted:${script}`, '--session-dir', join(user, 'child-sessions')]
    const config = write(join(user, 'config.yml'), [
      '- name: "@dsh/hooks"',
      '  config:',
      '    hooks:',
      `      SubagentStop: [{ hooks: [{ type: command, command: ${JSON.stringify(hook)} }] }]`,
      '- id: subagent-acp',
      '  name: "@dsh/subagent-acp"',
      '  config:',
      '    providerName: acp',
      `    command: ${JSON.stringify(process.execPath)}`,
      `    args: [${childArgs.map((arg) => JSON.stringify(arg)).join(', ')}]`,
      '- id: tool-subagent-acp',
      '  name: "@dsh/tool-subagent"',
      '  config: { provider: acp, toolName: subagent_acp }',
      '',
    ].join('\n'))
    const result = await runDsh(['run', '--config', config, '--model', `scripted:${script}`, '--session-dir', join(user, 'sessions'), '--quiet', 'go'], { cwd: project, env: { DSH_HOME: join(user, 'home') }, timeoutMs: 90_000 })
    expect(result.code, result.stderr).toBe(0)
    expect(result.stdout).toContain('granded')
    const stops = readdirSync(log).map((name) => JSON.parse(readFileSync(join(log, name), 'utf8')) as Record<string, unknown>)
    const seen = stops.map((stop) => `${String(stop.agent_type)} | ${String(stop.agent_path)} | ${String(stop.stop_reason)}`).sort()
    expect(seen).toEqual([
      'checker | dsh/checker "check" | completed',
      'grander | dsh/acp "remote"/grander "grand" | completed',
      'undefined | dsh/acp "remote" | completed',
    ])
    for (const stop of stops) {
      expect(stop.hook_event_name).toBe('SubagentStop')
      expect(typeof stop.agent_id).toBe('string')
    }
  })
})
