/**
 * A parent's explicit depth bound holds across the process boundary: `dsh acp` records
 * the bound its lineage carries and its own delegations stay within it.
 */
import { readdirSync, readFileSync, writeFileSync } from 'node:fs'
import { join } from 'node:path'
import { describe, expect, it } from 'vitest'
import { dshBin, runDsh, tempDir } from './cli.js'

interface HeaderLine {
  header: { origin?: string; delegationDepth?: number; maxDepth?: number }
}

describe('dsh run → dsh acp: the inherited depth bound', () => {
  it('a child of a parent with maxDepth 1 cannot delegate to depth 2 inside dsh acp: DEPTH_LIMIT, and no grandchild session exists', async () => {
    const dir = tempDir()
    const childModel = join(dir, 'child.yml')
    writeFileSync(childModel, [
      '- when: { depth: 1 }',
      '  reply:',
      '    - call: { tool: subagent, args: { description: "grandchild", prompt: "go deeper" } }',
      '    - text: "grandchild said: {{tool_results}}"',
      '- when: { depth: 2 }',
      '  reply: [{ text: "GRANDCHILD RAN" }]',
    ].join('\n'))
    const parentModel = join(dir, 'parent.yml')
    writeFileSync(parentModel, [
      '- when: { depth: 0 }',
      '  reply:',
      '    - call: { tool: subagent_acp, args: { description: "child", prompt: "delegate once more" } }',
      '    - text: "child said: {{tool_results}}"',
    ].join('\n'))
    const config = join(dir, 'acp.yml')
    writeFileSync(config, [
      '- id: subagent-acp',
      '  name: "@dsh/subagent-acp"',
      `  config: { command: ${JSON.stringify(process.execPath)}, args: [${JSON.stringify(dshBin)}, acp, --model, "scripted:${childModel}", --session-dir, ${JSON.stringify(dir)}] }`,
      '- id: tool-subagent-acp',
      '  name: "@dsh/tool-subagent"',
      '  config: { provider: acp, toolName: subagent_acp, maxDepth: 1 }',
    ].join('\n'))
    const result = await runDsh(['run', '--config', config, '--model', `scripted:${parentModel}`, '--session-dir', dir, '--quiet', 'delegate'])
    expect(result.code).toBe(0)
    expect(result.stdout).toContain('delegation depth limit reached: a child of')
    expect(result.stdout).toContain('above maxDepth 1')
    expect(result.stdout).not.toContain('GRANDCHILD RAN')
    const headers = readdirSync(dir)
      .filter((name) => name.endsWith('.jsonl'))
      .map((name) => (JSON.parse(readFileSync(join(dir, name), 'utf8').split('\n')[0]) as HeaderLine).header)
    expect(headers.map((header) => header.origin).sort()).toEqual(['acp', 'cli'])
    // The bound is durable: the dsh acp session's header carries it.
    expect(headers.find((header) => header.origin === 'acp')).toMatchObject({ delegationDepth: 1, maxDepth: 1 })
  })
})
