/**
 * Another vendor's agent delegating into dsh's tree: the real Claude Code binary (the
 * `claude-code` provider, on the fake Messages server) is given `dsh mcp serve` as an MCP
 * server and calls one of its helpers. Two dsh processes: `dsh run`, whose scripted root
 * delegates to a helper on the claude-code provider whose `mcpServers:` names the config's
 * server `dsh`; and the `dsh mcp serve` Claude Code starts from that entry (a second built
 * CLI with a home of its own), whose `reviewer` helper delegates to a spawned child that
 * answers with a marker. The marker travels child → reviewer → MCP result → Claude Code's
 * next model request → Claude Code's answer → the root's answer.
 */
import { existsSync, mkdirSync, readdirSync, readFileSync, writeFileSync } from 'node:fs'
import { join } from 'node:path'
import { afterEach, describe, expect, it } from 'vitest'
import YAML from 'yaml'
import { startFakeAnthropicMessages, type FakeAnthropicMessages, type RecordedAnthropicRequest } from '@dsh/testkit'
import { dshBin, runDsh, tempDir, testCodeCache } from './cli.js'
import { processesMentioning } from './processes.js'

const MARKER = 'checked by the spawned child 5c1e'

let fake: FakeAnthropicMessages | undefined
afterEach(async () => {
  await fake?.close()
  fake = undefined
})

type Block = { type: string; name?: string; text?: string; content?: string | Block[] }
type Body = { messages: { content: string | Block[] }[] }

/** The text of every tool_result block of a recorded Messages request. */
function toolResultTexts(request: RecordedAnthropicRequest): string[] {
  const body = request.body as Body
  return body.messages
    .flatMap((message) => (Array.isArray(message.content) ? message.content : []))
    .filter((block) => block.type === 'tool_result')
    .map((block) => (typeof block.content === 'string' ? block.content : (block.content ?? []).map((part) => part.text ?? '').join('')))
}

/** What these tests read of a session file's lines (its header, then events). */
interface SessionLine {
  type?: string
  header?: { id: string; origin: string; provider?: string; parentSession?: string; helper?: { name: string } }
  message?: { content: unknown }
  record?: { delegation?: { provider: string; helper?: string } }
}

/** Every line of every session file in `dir`, one array per file. */
function sessionsIn(dir: string): SessionLine[][] {
  return readdirSync(dir)
    .filter((name) => name.endsWith('.jsonl'))
    .map((name) => readFileSync(join(dir, name), 'utf8').split('\n').filter(Boolean).map((line) => JSON.parse(line) as SessionLine))
}

/** The model behind Claude Code: it calls the served reviewer, then answers quoting whatever the call returned, so the root sees only what came through MCP. */
const callTheReviewer = () => [
  { toolUses: [{ id: 'toolu_review', name: 'mcp__dsh__reviewer', input: { prompt: 'review the change' } }] },
  (request: RecordedAnthropicRequest) => ({ text: `Claude Code relays: ${toolResultTexts(request).join(' | ')}` }),
]

/** The MCP tool names Claude Code offered its model in `request` (listed in full or, when it defers MCP tools behind its tool search, by name in the system prompt). */
function offeredMcpTools(request: RecordedAnthropicRequest): Set<string> {
  return new Set(JSON.stringify(request.body).match(/mcp__\w+/g))
}

interface Setup {
  dir: string
  rootHome: string
  servedSessions: string
  servedMarker: string
  args: string[]
}

/**
 * The served dsh: its own home (a reviewer helper on spawn), script and session directory.
 * The root dsh: a home with the helper `asker` (claude-code provider, mcpServers: [dsh]), a
 * config composing Claude Code on the fake server and the MCP entry `dsh`, and the root's
 * approval rules `allow` (the run is --permission reject: nothing else is allowed).
 */
function setup(server: FakeAnthropicMessages, allow: string[]): Setup {
  const dir = tempDir('dsh-mcp-cc-')
  // Served side.
  const servedHome = join(dir, 'served-home')
  mkdirSync(join(servedHome, 'agents'), { recursive: true })
  writeFileSync(join(servedHome, 'agents', 'reviewer.md'), '---\nname: reviewer\ndescription: Reviews a change.\n---\nYou review changes.\n')
  writeFileSync(join(dir, 'served-script.yml'), [
    '- when: { prompt: "^review" }',
    '  reply:',
    '    - call: { tool: subagent, args: { agent: general, description: checker, prompt: "check it" } }',
    '    - text: "reviewer heard: {{last_tool_result}}"',
    '- when: { prompt: "^check it" }',
    '  reply:',
    `    - text: "${MARKER}"`,
    '',
  ].join('\n'))
  writeFileSync(join(dir, 'served.yml'), '- id: approvals\n  name: "@dsh/approvals"\n  config: {}\n')
  const servedSessions = join(dir, 'served-sessions')
  // A word only the served process's command line holds, to find it if it outlived the run.
  const servedMarker = join(dir, 'served-script.yml')
  const serve = [dshBin, 'mcp', 'serve', '--permission', 'allow', '--config', join(dir, 'served.yml'), '--model', `scripted:${servedMarker}`, '--session-dir', servedSessions]

  // Root side.
  const rootHome = join(dir, 'root-home')
  mkdirSync(join(rootHome, 'agents'), { recursive: true })
  writeFileSync(join(rootHome, 'agents', 'asker.md'), '---\nname: asker\ndescription: Asks dsh for a review through Claude Code.\nprovider: claude-code\nmcpServers: [dsh]\n---\nYou ask for reviews.\n')
  const claudeHome = join(dir, 'claude-home')
  mkdirSync(join(claudeHome, '.claude'), { recursive: true })
  writeFileSync(join(claudeHome, '.claude', 'settings.json'), JSON.stringify({ permissions: { defaultMode: 'default' } }))
  const config = [
    {
      id: 'subagent-claude-code',
      name: '@dsh/subagent-claude-code',
      config: {
        providerName: 'claude-code',
        timeoutMs: 120_000,
        env: {
          ANTHROPIC_BASE_URL: server.url,
          ANTHROPIC_API_KEY: 'sk-ant-fake',
          CLAUDE_CODE_DISABLE_NONESSENTIAL_TRAFFIC: '1',
          DISABLE_AUTOUPDATER: '1',
          CLAUDE_CODE_MAX_RETRIES: '0',
          HOME: claudeHome,
          CLAUDE_CONFIG_DIR: join(claudeHome, '.claude'),
        },
      },
    },
    // The served dsh gets only what its entry names (Claude Code's environment is minimal): its home, and the tests' code cache.
    { name: '@dsh/mcp', config: { servers: { dsh: { command: process.execPath, args: serve, env: { DSH_HOME: servedHome, DSH_CODE_CACHE: testCodeCache } } } } },
    { id: 'approvals', name: '@dsh/approvals', config: { allow } },
  ]
  writeFileSync(join(dir, 'dsh.yml'), YAML.stringify(config))
  writeFileSync(join(dir, 'root-script.yml'), [
    '- when: { depth: 0 }',
    '  reply:',
    '    - call: { tool: subagent, args: { agent: asker, description: "ask dsh", prompt: "Ask dsh for a review." } }',
    '    - text: "root got: {{last_tool_result}}"',
    '',
  ].join('\n'))
  const args = ['run', '--config', join(dir, 'dsh.yml'), '--model', `scripted:${join(dir, 'root-script.yml')}`, '--session-dir', join(dir, 'sessions'), '--permission', 'reject', '--quiet', 'go']
  return { dir, rootHome, servedSessions, servedMarker, args }
}

describe('Claude Code delegating into dsh through dsh mcp serve', () => {
  it("a Claude Code child given dsh mcp serve calls its reviewer helper; the served dsh's spawned child's answer reaches Claude Code and the root", async () => {
    fake = await startFakeAnthropicMessages(callTheReviewer())
    const s = setup(fake, ['mcp__dsh__reviewer'])
    const result = await runDsh(s.args, { cwd: s.dir, env: { DSH_HOME: s.rootHome }, timeoutMs: 120_000 })
    expect(result.code, result.stderr).toBe(0)
    // A Claude Code that cannot run here makes no model request: the root's answer then says why.
    expect(fake.messageRequests, `${result.stdout}\n${result.stderr}`).toHaveLength(2)

    // Claude Code offered the served helpers to its model as MCP tools, named as it names them: the model's call is by that name.
    expect(offeredMcpTools(fake.messageRequests[0]!)).toEqual(new Set(['mcp__dsh__delegate', 'mcp__dsh__reviewer']))
    // Its second request carries the tool result: the served reviewer's answer with its child's marker.
    expect(toolResultTexts(fake.messageRequests[1]!)).toEqual([`reviewer heard: ${MARKER}`])
    expect(result.stdout).toContain(`root got: Claude Code relays: reviewer heard: ${MARKER}`)

    // The root delegated to the helper on Claude Code, whose call of the served reviewer the root's broker let through by
    // its rule, naming the Claude Code child (nothing else is allowed: the run is --permission reject).
    const rootEvents = sessionsIn(join(s.dir, 'sessions')).flat()
    expect(rootEvents.filter((event) => event.type === 'tool/result').map((event) => event.record?.delegation)).toMatchObject([{ provider: 'claude-code', helper: 'asker' }])
    const approvals = rootEvents.filter((event) => event.type === 'approval')
    expect(approvals).toMatchObject([{ request: { tool: 'mcp__dsh__reviewer', path: ['dsh', 'asker "ask dsh"'], child: expect.stringMatching(/^claude-code:/) }, permission: { decision: 'allow-once', source: 'rule' } }])

    // The served dsh recorded the delegation: a session served over MCP as the reviewer, given Claude Code's prompt, and
    // below it the spawned child's, which gave the marker.
    const served = sessionsIn(s.servedSessions)
    expect(served).toHaveLength(2)
    const reviewer = served.find((events) => events[0]?.header?.origin === 'mcp')!
    expect(reviewer[0]!.header).toMatchObject({ origin: 'mcp', helper: { name: 'reviewer' } })
    expect(reviewer.find((event) => event.type === 'user/message')?.message?.content).toEqual([{ type: 'text', text: 'review the change' }])
    const child = served.find((events) => events !== reviewer)!
    expect(child[0]!.header).toMatchObject({ origin: 'subagent', provider: 'spawn', parentSession: reviewer[0]!.header!.id })
    expect(child.find((event) => event.type === 'assistant/message')?.message?.content).toEqual([{ type: 'text', text: MARKER }])

    // Claude Code stopped the served dsh with itself.
    expect(processesMentioning(s.servedMarker)).toEqual([])
  }, 180_000)

  it("without a rule allowing it, the root refuses Claude Code's call of the served helper, which the model reads, and the served dsh runs nothing", async () => {
    fake = await startFakeAnthropicMessages(callTheReviewer())
    const s = setup(fake, [])
    const result = await runDsh(s.args, { cwd: s.dir, env: { DSH_HOME: s.rootHome }, timeoutMs: 120_000 })
    expect(result.code, result.stderr).toBe(0)
    expect(fake.messageRequests, `${result.stdout}\n${result.stderr}`).toHaveLength(2)
    // Claude Code started the served dsh and listed its tools; the call is what the root refused.
    expect(offeredMcpTools(fake.messageRequests[0]!)).toEqual(new Set(['mcp__dsh__delegate', 'mcp__dsh__reviewer']))
    expect(toolResultTexts(fake.messageRequests[1]!)).toEqual([expect.stringContaining('Permission denied by dsh run --permission reject')])
    expect(result.stdout).not.toContain(MARKER)
    const approvals = sessionsIn(join(s.dir, 'sessions')).flat().filter((event) => event.type === 'approval')
    expect(approvals).toMatchObject([{ request: { tool: 'mcp__dsh__reviewer', child: expect.stringMatching(/^claude-code:/) }, permission: { decision: 'reject', source: 'default' } }])
    // No call reached the served dsh.
    expect(existsSync(s.servedSessions) ? sessionsIn(s.servedSessions) : []).toEqual([])
    expect(processesMentioning(s.servedMarker)).toEqual([])
  }, 180_000)
})
