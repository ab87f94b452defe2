/**
 * `dsh demo`: the whole seam in one keyless run. A scripted parent delegates in one step
 * to a spawn child, a fork child, an ACP child (`dsh acp` in its own process) and a
 * background child it collects later with `task_output`; when the Codex and Claude Code
 * packages are installed, also to both, pointed at fake model servers on 127.0.0.1 (they
 * are optional: without them the summary names the one to install). It ends with a
 * summary of every child.
 */
import { parseVerbArgs } from '../args.js'
import { mkdirSync, mkdtempSync, rmSync, writeFileSync } from 'node:fs'
import { tmpdir } from 'node:os'
import { join } from 'node:path'
import { fileURLToPath } from 'node:url'
import type { Agent } from '@dsh/agent'
import type { SubagentUsage } from '@dsh/subagent'
import type { PluginEntry } from '../compose.js'
import { dshHome } from '../config-file.js'
import { defaultSessionDir } from '../defaults.js'
import { runUntilQuiet } from '@dsh/tasks'
import { watch } from '../run.js'
import { startRuntime } from '../runtime.js'
import { seconds } from '../progress/render.js'

const here = fileURLToPath(new URL('.', import.meta.url))
const dshMain = join(here, '..', 'main.js')
const acpChildScript = join(here, '..', '..', 'demo', 'acp-child.yml')

interface Peer {
  tool: string
  entries: PluginEntry[]
  /** Where the child's session lives, for the summary. */
  storage: string
  close(): Promise<void>
}

/** An optional provider the demo could not include here, and why (one line naming what to install). */
interface LeftOut {
  provider: string
  reason: string
}

interface ChildRecord {
  id: string
  answer?: string
  provider: string
  label?: string
  endedAt?: number
  stopReason?: string
  diagnostic?: string
  local: boolean
  /** From `subagent/end`: what the child's run used, whichever provider ran it. */
  usage?: SubagentUsage
}

export async function demoVerb(args: string[]): Promise<number> {
  const { values } = parseVerbArgs('demo', {
    args,
    allowPositionals: false,
    options: { 'session-dir': { type: 'string' }, quiet: { type: 'boolean', default: false }, verbose: { type: 'boolean', default: false } },
  })
  const sessionDir = values['session-dir'] ?? defaultSessionDir()
  const scratch = mkdtempSync(join(tmpdir(), 'dsh-demo-'))
  const found = await Promise.all([codexPeer(scratch), claudePeer(scratch)])
  const peers = found.filter((peer): peer is Peer => 'entries' in peer)
  const leftOut = found.filter((peer): peer is LeftOut => 'reason' in peer)
  // The ACP child composes the defaults alone, as the demo does: without a --config it
  // would look for ./dsh.yml or ~/.dsh/config.yml (and refuse a dsh.yml not trusted).
  const childConfig = join(scratch, 'acp-child-config.yml')
  try {
    writeFileSync(childConfig, '[]\n')
    const extra: PluginEntry[] = [
      { id: 'llm-scripted', name: '@dsh/llm-scripted', config: { scripts: { demo: parentScript(peers) } } },
      { id: 'tool-subagent-fork', name: '@dsh/tool-subagent', config: { provider: 'fork', toolName: 'subagent_fork', enableRunInBackground: false } },
      {
        id: 'subagent-acp',
        name: '@dsh/subagent-acp',
        config: { command: process.execPath, args: [dshMain, 'acp', '--config', childConfig, '--model', `scripted:${acpChildScript}`, '--session-dir', sessionDir], timeoutMs: 60_000 },
      },
      { id: 'tool-subagent-acp', name: '@dsh/tool-subagent', config: { provider: 'acp', toolName: 'subagent_acp', enableRunInBackground: false } },
      ...peers.flatMap((peer) => peer.entries),
    ]
    const runtime = await startRuntime({ model: 'scripted:demo', sessionDir, extra, verbose: values.verbose, config: undefined, ignoreDiscoveredConfig: true })
    let root: Agent | undefined
    try {
      const children = recordChildren(runtime.ctx)
      root = await runtime.ctx.agents.create({ meta: { origin: 'cli', cwd: process.cwd() } })
      const startedAt = Date.now()
      const view = watch(runtime, root, { prompt: '', quiet: values.quiet })
      const run = await runUntilQuiet(root, 'Show what dsh can delegate: one step, every provider, then collect the background child.', { tasks: runtime.ctx.get('tasks') })
      view.finish(run)
      process.stdout.write(summary(children, runtime.ctx.sessions.locate.bind(runtime.ctx.sessions), peers, leftOut, sessionDir, root, startedAt))
      return run.last.reason === 'completed' && [...children.values()].every((child) => child.stopReason === 'completed') ? 0 : 1
    } finally {
      await root?.dispose()
      await runtime.dispose()
    }
  } finally {
    await Promise.all(peers.map((peer) => peer.close()))
    rmSync(scratch, { recursive: true, force: true })
  }
}

/** The parent's script: one step of parallel delegations, collect the background child, answer. */
function parentScript(peers: Peer[]): unknown[] {
  const delegations = [
    { tool: 'subagent', args: { description: 'survey the repo', prompt: 'demo: survey the repository layout' } },
    { tool: 'subagent_fork', args: { description: 'review the plan', prompt: 'demo: review the plan so far' } },
    { tool: 'subagent_acp', args: { description: 'ask an ACP agent', prompt: 'demo: say hello from another process' } },
    { tool: 'subagent', args: { description: 'background audit', prompt: 'demo: audit in the background', run_in_background: true } },
    ...peers.map((peer) => ({ tool: peer.tool, args: { description: `ask ${peer.tool.replace('subagent_', '')}`, prompt: 'Say hello to dsh in one sentence.' } })),
  ]
  return [
    { when: { prompt: '^demo: survey' }, reply: [{ text: 'spawn child: a fresh agent with an empty session; the layout is packages/<group>/<name>.' }] },
    { when: { prompt: '^demo: review' }, reply: [{ text: 'fork child: I see the parent\'s conversation up to its delegating call (your request included) and my own prompt.' }] },
    { when: { prompt: '^demo: audit' }, reply: [{ text: 'background child: audit finished while the parent kept working.', delay_ms: 300 }] },
    {
      when: { depth: 0 },
      reply: [
        { text: 'Delegating to every provider at once.', calls: delegations },
        { text: 'The foreground children answered; now collecting the background one.', call: { tool: 'task_output', args: { task_id: 'subagent-1', wait: true, timeout_ms: 30_000 } } },
        { text: 'Done. What the children said:\n{{tool_results}}' },
      ],
    },
  ]
}

function recordChildren(ctx: import('cordis').Context): Map<string, ChildRecord> {
  const children = new Map<string, ChildRecord>()
  ctx.on('subagent/start', (info) => {
    children.set(info.runId, { id: info.id, provider: info.provider, label: info.label, local: info.local })
  })
  ctx.on('subagent/end', (info) => {
    const child = children.get(info.runId)
    if (!child) return
    child.endedAt = Date.now()
    child.stopReason = info.stopReason
    child.diagnostic = info.diagnostic
    child.answer = info.lastAssistantMessage?.map((block) => block.text).join('')
    if (info.usage) child.usage = info.usage
  })
  return children
}

function summary(children: Map<string, ChildRecord>, locate: (id: string) => string | undefined, peers: Peer[], leftOut: LeftOut[], sessionDir: string, root: Agent, startedAt: number): string {
  const rows = [...children.values()].map((child) => {
    const where = child.local ? locate(child.id) ?? '(not persisted)' : child.provider === 'acp' ? `in ${sessionDir}, written by the dsh acp child` : peers.find((peer) => peer.entries.some((entry) => entry.config?.providerName === child.provider))?.storage ?? '(kept by the child process)'
    // Measured from the parent's start: a remote child announces itself only once its process is up.
    return [child.provider, child.label ?? '', child.stopReason ?? 'running', child.endedAt ? seconds(child.endedAt - startedAt) : '-', usageCell(child.usage), where]
  })
  const header = ['provider', 'task', 'stop reason', 'done at', 'tokens', 'session']
  const widths = header.map((title, column) => Math.max(title.length, ...rows.map((row) => row[column].length)))
  const line = (cells: string[]) => cells.map((cell, column) => (column === cells.length - 1 ? cell : cell.padEnd(widths[column]))).join('  ')
  return [
    '',
    `Summary: ${children.size} children of ${root.id}`,
    line(header),
    ...rows.map(line),
    `Parent session: ${locate(root.id) ?? '(not persisted)'}`,
    '',
    'What each child said:',
    ...[...children.values()].map((child) => `  ${child.provider.padEnd(widths[0])}  ${child.answer ?? child.diagnostic ?? '(nothing)'}`),
    ...(leftOut.length ? [`Left out: ${leftOut.map((peer) => peer.provider).join(' and ')}, whose packages are optional and not installed here:`, ...leftOut.map((peer) => `  ${peer.provider.padEnd(Math.max(...leftOut.map((other) => other.provider.length)))}  ${peer.reason}`)] : []),
    `Next: dsh sessions tree${sessionDir === join(dshHome(), 'sessions') ? '' : ` --session-dir ${sessionDir}`}   (the lineage, rebuilt from the session files)`,
    '',
  ].join('\n')
}

/** `in 1234 (cached 100) / out 56`, or `-` when the provider reported no usage. */
function usageCell(usage: SubagentUsage | undefined): string {
  if (!usage) return '-'
  return `in ${usage.inputTokens}${usage.cachedInputTokens ? ` (cached ${usage.cachedInputTokens})` : ''} / out ${usage.outputTokens}`
}

/** The codex provider against a fake Responses API, when its optional @openai/codex is installed. */
async function codexPeer(scratch: string): Promise<Peer | LeftOut> {
  const missing = (await import('@dsh/subagent-codex')).missingCodexPackage()
  if (missing) return { provider: 'codex', reason: missing }
  // @dsh/testkit is a devDependency of the CLI: its fake servers are bundled into dsh-main.cjs, so no install needs testkit.
  const { startFakeOpenAIResponses } = await import('@dsh/testkit')
  const server = await startFakeOpenAIResponses()
  const answers = Array.from({ length: 8 }, () => ({ text: 'Codex here: hello, dsh! (answered by a fake Responses API on 127.0.0.1)' }))
  server.enqueue(...answers)
  const home = join(scratch, 'codex-home')
  mkdirSync(home, { recursive: true })
  writeFileSync(join(home, 'config.toml'), [
    'model = "gpt-5.5"',
    'model_provider = "fake"',
    'check_for_update_on_startup = false',
    '[model_providers.fake]',
    'name = "fake"',
    `base_url = "${server.url}"`,
    'env_key = "DSH_DEMO_CODEX_KEY"',
    'wire_api = "responses"',
    'request_max_retries = 0',
    'stream_max_retries = 0',
    '[analytics]',
    'enabled = false',
    '[features]',
    'plugins = false',
    '',
  ].join('\n'))
  return {
    tool: 'subagent_codex',
    storage: '(ephemeral Codex thread, not stored)',
    entries: [
      { id: 'subagent-codex', name: '@dsh/subagent-codex', config: { providerName: 'codex', env: { CODEX_HOME: home, HOME: home, DSH_DEMO_CODEX_KEY: 'demo' }, timeoutMs: 60_000 } },
      { id: 'tool-subagent-codex', name: '@dsh/tool-subagent', config: { provider: 'codex', toolName: 'subagent_codex', enableRunInBackground: false } },
    ],
    close: () => server.close(),
  }
}

/** The claude-code provider against a fake Messages API, when its optional Agent SDK (with the SDK's binary) is installed. */
async function claudePeer(scratch: string): Promise<Peer | LeftOut> {
  const { missingClaudeCodePackage, resolveClaudeExecutable } = await import('@dsh/subagent-claude-code')
  const missing = missingClaudeCodePackage() ?? (resolveClaudeExecutable() ? undefined : `the Agent SDK is installed without its Claude Code binary for ${process.platform}-${process.arch} (install it with optional dependencies)`)
  if (missing) return { provider: 'claude-code', reason: missing }
  const { startFakeAnthropicMessages } = await import('@dsh/testkit')
  // Claude Code may make side requests (titles, counts): answer every one.
  const server = await startFakeAnthropicMessages(Array.from({ length: 16 }, () => () => ({ text: 'Claude Code here: hello, dsh! (answered by a fake Messages API on 127.0.0.1)' })))
  const home = join(scratch, 'claude-home')
  const configDir = join(home, '.claude')
  mkdirSync(configDir, { recursive: true })
  writeFileSync(join(configDir, 'settings.json'), JSON.stringify({ permissions: { defaultMode: 'default' } }))
  return {
    tool: 'subagent_claude',
    storage: '(not stored: persistSession is off)',
    entries: [
      {
        id: 'subagent-claude-code',
        name: '@dsh/subagent-claude-code',
        config: {
          providerName: 'claude-code',
          env: {
            ANTHROPIC_BASE_URL: server.url,
            ANTHROPIC_API_KEY: 'demo',
            CLAUDE_CODE_DISABLE_NONESSENTIAL_TRAFFIC: '1',
            DISABLE_AUTOUPDATER: '1',
            CLAUDE_CODE_MAX_RETRIES: '0',
            HOME: home,
            CLAUDE_CONFIG_DIR: configDir,
          },
          timeoutMs: 60_000,
        },
      },
      { id: 'tool-subagent-claude', name: '@dsh/tool-subagent', config: { provider: 'claude-code', toolName: 'subagent_claude', enableRunInBackground: false } },
    ],
    close: () => server.close(),
  }
}
