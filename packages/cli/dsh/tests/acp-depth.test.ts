/** `dsh acp` bounds delegation depth across processes: a too-deep `session/new` is refused. */
import { readdirSync, readFileSync, realpathSync, writeFileSync } from 'node:fs'
import { join } from 'node:path'
import { afterEach, describe, expect, it } from 'vitest'
import { methods, PROTOCOL_VERSION, RequestError } from '@agentclientprotocol/sdk'
import { killRunning, serveDsh } from './acp-client.js'
import { dshBin, runDsh, tempDir } from './cli.js'

afterEach(killRunning)

async function started(args: string[]) {
  const dir = tempDir()
  const model = join(dir, 'model.yml')
  writeFileSync(model, '- reply: [{ text: "hi" }]\n')
  const served = serveDsh(['--model', `scripted:${model}`, '--session-dir', dir, ...args])
  await served.connection.agent.request(methods.agent.initialize, { protocolVersion: PROTOCOL_VERSION, clientCapabilities: {} })
  const newSession = (delegationDepth: number) =>
    served.connection.agent.request(methods.agent.session.new, { cwd: realpathSync(dir), mcpServers: [], _meta: { dsh: { parentSession: 'parent-1', delegationDepth, provider: 'acp' } } })
  const sessionFiles = () => readdirSync(dir).filter((name) => name.endsWith('.jsonl'))
  return { served, newSession, sessionFiles }
}

async function refusal(promise: Promise<unknown>): Promise<RequestError> {
  try {
    await promise
  } catch (error) {
    return error as RequestError
  }
  throw new Error('session/new was accepted')
}

describe('dsh acp depth bound', () => {
  it('by default accepts a session at depth 3 and refuses one at depth 4 with a clear JSON-RPC error, creating no session', async () => {
    const { served, newSession, sessionFiles } = await started([])
    const accepted = await newSession(3)
    expect(accepted.sessionId).toBeTruthy()
    const error = await refusal(newSession(4))
    expect(error.code).toBe(-32600)
    expect(error.message).toContain('delegation depth limit reached: this session would be at depth 4, above this server\'s maxDepth 3')
    expect(error.data).toEqual({ delegationDepth: 4, maxDepth: 3 })
    served.child.stdin!.end()
    expect((await served.exited).code).toBe(0)
    expect(sessionFiles()).toHaveLength(1)
  })

  it('--max-depth sets the bound', async () => {
    const { served, newSession } = await started(['--max-depth', '1'])
    expect((await newSession(1)).sessionId).toBeTruthy()
    expect((await refusal(newSession(2))).message).toContain('above this server\'s maxDepth 1')
    served.child.stdin!.end()
    await served.exited
  })

  it('a --max-depth that is not a whole number is a usage error, exit 2', async () => {
    const result = await runDsh(['acp', '--model', 'scripted:x', '--max-depth', 'two'])
    expect(result.code).toBe(2)
    expect(result.stderr.trim()).toBe('dsh acp: --max-depth must be a whole number of at least 0 (got "two")')
  })
})

describe('dsh acp depth bound through a real process chain', () => {
  it('a dsh run parent delegating to `dsh acp --max-depth 0` gets the refusal as its tool result, and no child session exists', async () => {
    const dir = tempDir()
    const childModel = join(dir, 'child.yml')
    writeFileSync(childModel, '- reply: [{ text: "should never run" }]\n')
    const parentModel = join(dir, 'parent.yml')
    writeFileSync(parentModel, [
      '- when: { depth: 0 }',
      '  reply:',
      '    - call: { tool: subagent_acp, args: { description: "too deep", prompt: "go deeper" } }',
      '    - text: "The child said: {{tool_results}}"',
    ].join('\n'))
    const config = join(dir, 'acp.yml')
    writeFileSync(config, [
      '- id: subagent-acp',
      '  name: "@dsh/subagent-acp"',
      `  config: { command: ${JSON.stringify(process.execPath)}, args: [${JSON.stringify(dshBin)}, acp, --max-depth, "0", --model, "scripted:${childModel}", --session-dir, ${JSON.stringify(dir)}] }`,
      '- id: tool-subagent-acp',
      '  name: "@dsh/tool-subagent"',
      '  config: { provider: acp, toolName: subagent_acp }',
    ].join('\n'))
    const result = await runDsh(['run', '--config', config, '--model', `scripted:${parentModel}`, '--session-dir', dir, '--quiet', 'delegate'])
    expect(result.stdout).toContain('delegation depth limit reached: this session would be at depth 1, above this server\'s maxDepth 0')
    expect(result.stdout).not.toContain('should never run')
    const headers = readdirSync(dir)
      .filter((name) => name.endsWith('.jsonl'))
      .map((name) => JSON.parse(readFileSync(join(dir, name), 'utf8').split('\n')[0]) as { header: { origin?: string } })
    expect(headers.map((line) => line.header.origin)).toEqual(['cli'])
  })
})
