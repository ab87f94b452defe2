/**
 * A `dsh acp` child in a tree can never do more than its ancestors allow: its own
 * `--permission allow`, or allow rules of its own config, run nothing the levels it received
 * with its lineage do not allow; anything else is asked up the tree (its client's
 * `session/request_permission`, the parent's broker), where the root's policy decides.
 * The parent is the built dsh (`dsh run`, or `dsh acp` driven by the official SDK client),
 * its `acp` provider starting the child as its own process.
 */
import { existsSync, readdirSync, readFileSync, realpathSync, writeFileSync } from 'node:fs'
import { join } from 'node:path'
import { afterEach, describe, expect, it } from 'vitest'
import { methods, PROTOCOL_VERSION } from '@agentclientprotocol/sdk'
import { killTrustRunning, pick, serveTrusted } from './acp-trust-client.js'
import { dshBin, runDsh, tempDir } from './cli.js'

afterEach(killTrustRunning)

interface Tree {
  dir: string
  script: string
  /** The config of the root: the acp provider starting `dsh acp <childArgs>`, and the root's own approval rules. */
  rootConfig(childArgs: string[], rootRules?: string): string
  /** A config of the child's own: its approval rules. */
  childConfig(rules: string): string
  ran(name: string): boolean
  /** The permission recorded with each command the child's session ran or refused, by command. */
  childDecisions(): Record<string, Record<string, unknown>>
}

/** The root delegates once to an ACP child, which runs `touch <dir>/first` and `touch <dir>/second`. */
function tree(): Tree {
  const dir = realpathSync(tempDir())
  const script = join(dir, 'script.yml')
  writeFileSync(script, [
    '- when: { prompt: "child work" }',
    '  reply:',
    `    - call: { tool: bash, args: { command: "touch ${join(dir, 'first')}" } }`,
    `    - call: { tool: bash, args: { command: "touch ${join(dir, 'second')}" } }`,
    '    - text: "child: {{tool_results}}"',
    '- when: { depth: 0 }',
    '  reply:',
    '    - call: { tool: subagent_acp, args: { description: "child", prompt: "child work" } }',
    '    - text: "root: {{last_tool_result}}"',
  ].join('\n'))
  const childSessions = join(dir, 'child-sessions')
  return {
    dir,
    script,
    rootConfig(childArgs, rootRules) {
      const file = join(dir, `root-${Math.random().toString(36).slice(2)}.yml`)
      const args = [dshBin, 'acp', '--model', `scripted:${script}`, '--session-dir', childSessions, ...childArgs]
      writeFileSync(file, [
        ...(rootRules ? ['- id: approvals', '  name: "@dsh/approvals"', `  config: { ${rootRules} }`] : []),
        '- id: subagent-acp',
        '  name: "@dsh/subagent-acp"',
        '  config:',
        '    providerName: acp',
        `    command: ${JSON.stringify(process.execPath)}`,
        `    args: [${args.map((arg) => JSON.stringify(arg)).join(', ')}]`,
        '- id: tool-subagent-acp',
        '  name: "@dsh/tool-subagent"',
        '  config: { provider: acp, toolName: subagent_acp }',
      ].join('\n'))
      return file
    },
    childConfig(rules) {
      const file = join(dir, 'child.yml')
      writeFileSync(file, ['- id: approvals', '  name: "@dsh/approvals"', `  config: { ${rules} }`].join('\n'))
      return file
    },
    ran: (name) => existsSync(join(dir, name)),
    childDecisions() {
      const found: Record<string, Record<string, unknown>> = {}
      for (const name of readdirSync(childSessions).filter((file) => file.endsWith('.jsonl'))) {
        const commands = new Map<string, string>()
        for (const line of readFileSync(join(childSessions, name), 'utf8').trim().split('\n')) {
          const event = JSON.parse(line) as { type?: string; call?: { id: string; args?: { command?: string } }; result?: { callId: string }; permission?: Record<string, unknown> }
          if (event.type === 'tool/call' && event.call?.args?.command) commands.set(event.call.id, event.call.args.command)
          if (event.type === 'tool/result' && event.permission) found[commands.get(event.result!.callId)!.split('/').at(-1)!] = event.permission
        }
      }
      return found
    },
  }
}

/** `dsh run` at the root, with nobody to ask (not a terminal): `--permission` decides what no rule does. */
function runRoot(t: Tree, config: string, permission: 'allow' | 'reject') {
  return runDsh(['run', '--permission', permission, '--config', config, '--model', `scripted:${t.script}`, '--session-dir', t.dir, 'go'], { cwd: t.dir, env: { DSH_HOME: t.dir } })
}

describe('a dsh acp child is bounded by its ancestors', () => {
  it('a child started with --permission allow runs nothing the root refused: its commands are asked up the tree, where --permission reject decides', async () => {
    const t = tree()
    const result = await runRoot(t, t.rootConfig(['--permission', 'allow']), 'reject')
    expect(result.code, result.stderr).toBe(0)
    expect(t.ran('first')).toBe(false)
    expect(t.ran('second')).toBe(false)
    expect(t.childDecisions().first).toMatchObject({ decision: 'reject', by: 'dsh run --permission reject (through the ACP client)', source: 'default' })
  })

  it('asked up the tree, the same child runs what the root allows: the root\'s --permission allow decides for it', async () => {
    const t = tree()
    const result = await runRoot(t, t.rootConfig(['--permission', 'allow']), 'allow')
    expect(result.code, result.stderr).toBe(0)
    expect(t.ran('first')).toBe(true)
    expect(t.childDecisions().first).toMatchObject({ decision: 'allow-once', by: 'dsh run --permission allow (through the ACP client)', source: 'default' })
  })

  it('a child whose own config allows bash runs nothing the root refused', async () => {
    const t = tree()
    const result = await runRoot(t, t.rootConfig(['--config', t.childConfig('allow: [bash]')]), 'reject')
    expect(result.code, result.stderr).toBe(0)
    expect(t.ran('first')).toBe(false)
    expect(t.ran('second')).toBe(false)
    expect(t.childDecisions().first).toMatchObject({ decision: 'reject', by: 'dsh run --permission reject (through the ACP client)', source: 'default' })
  })

  it("what the root's rules allow still runs in the child unasked, and only that: its own allow of everything does not reach further", async () => {
    const t = tree()
    const config = t.rootConfig(['--permission', 'allow', '--config', t.childConfig('allow: [bash]')], `allow: ["bash(touch ${join(t.dir, 'first')})"]`)
    const result = await runRoot(t, config, 'reject')
    expect(result.code, result.stderr).toBe(0)
    expect(t.ran('first')).toBe(true)
    expect(t.ran('second')).toBe(false)
    const decisions = t.childDecisions()
    // Decided in the child by the root's rule, which came down with the lineage: nobody was asked.
    expect(decisions.first).toMatchObject({ decision: 'allow-once', by: 'the policy', source: 'rule', rule: `bash(touch ${join(t.dir, 'first')}) (config)` })
    expect(decisions.second).toMatchObject({ decision: 'reject', by: 'dsh run --permission reject (through the ACP client)', source: 'default' })
  })

  it('under a root driven by an ACP client, the child\'s commands reach that client, naming the child, and its rejection holds', async () => {
    const t = tree()
    const served = serveTrusted(['--config', t.rootConfig(['--permission', 'allow', '--config', t.childConfig('allow: [bash]')]), '--model', `scripted:${t.script}`, '--session-dir', t.dir], pick('reject_once'))
    const { agent } = served.connection
    await agent.request(methods.agent.initialize, { protocolVersion: PROTOCOL_VERSION, clientCapabilities: {} })
    const session = await agent.buildSession(t.dir).start()
    void session.prompt('go')
    let stop: string | undefined
    while (!stop) {
      const message = await session.nextUpdate()
      if (message.kind === 'stop') stop = message.stopReason
    }
    served.child.stdin!.end()
    await served.exited
    expect(stop).toBe('end_turn')
    expect(served.asked.map((request) => request.toolCall.title)).toEqual([`acp "child": bash touch ${join(t.dir, 'first')}`, `acp "child": bash touch ${join(t.dir, 'second')}`])
    expect(t.ran('first')).toBe(false)
    expect(t.ran('second')).toBe(false)
    expect(t.childDecisions().first).toMatchObject({ decision: 'reject', by: 'the ACP client (through the ACP client)', source: 'user' })
  })
})
