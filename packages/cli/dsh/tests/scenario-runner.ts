/**
 * The scenario tier: `scenarios/<name>/` holds a command (scenario.json: `dsh run`, or
 * `dsh chat` with its prompts piped from a file), the recording of
 * every session's model calls (recording/), and what the command must print and store
 * (expected/stdout.txt and expected/sessions/<lineage>.jsonl, normalised for ids, times
 * and paths). Modes:
 * - replay (default): run the command with `--model replay:recording` and compare;
 * - refresh: run it the same way and write the expectations (keyless);
 * - record: run it against its recording model (a script, or one of testkit's fake model
 *   servers with scripted answers, FAKE_MODEL_SERVERS; a real model with a key works the
 *   same way), storing a new recording, then refresh.
 * What a scenario.json may say: scenarios/README.md.
 */
import { mkdirSync, readFileSync, readdirSync, rmSync, writeFileSync, existsSync } from 'node:fs'
import { join, resolve } from 'node:path'
import { isRecord } from '@dsh/base'
import { startFakeAnthropicMessages, startFakeOpenAIChat, startFakeOpenAIResponses, type FakeChatResponse, type FakeMessagesAnswer, type FakeMessagesResponse, type FakeResponsesAnswer } from '@dsh/testkit'
import YAML from 'yaml'
import { repoRoot, runDsh, tempDir } from './cli.js'

export const scenariosRoot = join(repoRoot, 'scenarios')

export type ScenarioMode = 'replay' | 'refresh' | 'record'

/** The verbs a scenario can run: `run` (a prompt in its arguments), `chat` (prompts piped in, `stdin`) or `workflow` (`dsh workflow run`, the file in its arguments). */
const SCENARIO_COMMANDS = ['run', 'chat', 'workflow'] as const
export type ScenarioCommand = (typeof SCENARIO_COMMANDS)[number]

export interface Scenario {
  name: string
  dir: string
  /** The verb (default `run`). */
  command: ScenarioCommand
  /** Its arguments after the model and session flags (config relative to the scenario). */
  args: string[]
  /** A file of the scenario written to the command's standard input (else stdin is closed from the start). */
  stdin?: string
  /** How `record` produces the recording: a model spec, or a fake server and its scripted answers. */
  record: { model: string } | { fakeServer: FakeServerName; answers: unknown[] }
  /** The exit code the command must end with (default 0). */
  exitCode: number
  /**
   * Product children (Codex, Claude Code) call their own model endpoints, which are not
   * recorded: testkit's fake servers answer them with these, in replay as in record.
   */
  products: { codex?: FakeResponsesAnswer[]; claudeCode?: FakeMessagesAnswer[] }
}

export function listScenarios(): Scenario[] {
  if (!existsSync(scenariosRoot)) return []
  return readdirSync(scenariosRoot, { withFileTypes: true })
    .filter((entry) => entry.isDirectory() && existsSync(join(scenariosRoot, entry.name, 'scenario.json')))
    .map((entry) => loadScenario(entry.name))
}

/** The key variable (`apiKeyEnv`) of a fake server's adapter entry: set while recording alone, so a replay has no key to use. */
const FAKE_MODEL_KEY_ENV = 'FAKE_MODEL_KEY'

/**
 * The fake model servers `record` can run a scenario's models on, by the key naming the
 * scripted answers in scenario.json: how to start one, the config entry pointing its adapter
 * at it (appended to the scenario's own config while recording), and the model spec the run
 * is given.
 */
const FAKE_MODEL_SERVERS = {
  /** testkit's fake OpenAI Chat Completions server, answers `FakeChatResponse`; the models are `fake:`. */
  fakeOpenAI: {
    start: (answers: unknown[]) => startFakeOpenAIChat(answers as FakeChatResponse[]),
    entry: (url: string) => `- id: llm-fake\n  name: "@dsh/llm-openai"\n  config: { name: fake, baseURL: "${url}", model: fake-model, apiKeyEnv: ${FAKE_MODEL_KEY_ENV} }\n`,
    model: 'fake:fake-model',
  },
  /** testkit's fake Anthropic Messages server, answers `FakeMessagesResponse`; the default `anthropic` adapter pointed at it, so the models are `anthropic:`. */
  fakeAnthropic: {
    start: (answers: unknown[]) => startFakeAnthropicMessages(answers as FakeMessagesResponse[]),
    entry: (url: string) => `- id: llm-anthropic\n  name: "@dsh/llm-anthropic"\n  config: { baseURL: "${url}", apiKeyEnv: ${FAKE_MODEL_KEY_ENV} }\n`,
    model: 'anthropic:claude-fake',
  },
} satisfies Record<string, { start(answers: unknown[]): Promise<{ url: string; close(): Promise<void> }>; entry(url: string): string; model: string }>

type FakeServerName = keyof typeof FAKE_MODEL_SERVERS
const fakeServerNames = Object.keys(FAKE_MODEL_SERVERS) as FakeServerName[]

function loadScenario(name: string): Scenario {
  const dir = join(scenariosRoot, name)
  const file = join(dir, 'scenario.json')
  const raw = JSON.parse(readFileSync(file, 'utf8')) as unknown
  if (!isRecord(raw) || !Array.isArray(raw.args) || !raw.args.every((arg) => typeof arg === 'string') || !isRecord(raw.record)) {
    throw new Error(`${file}: expected {"command"?: "${SCENARIO_COMMANDS.join('" | "')}", "args": [...], "stdin"?: FILE, "record": {"model": SPEC} | {"${fakeServerNames.join('" | "')}": [...]}, "exitCode"?: N}`)
  }
  const command = raw.command ?? 'run'
  if (!SCENARIO_COMMANDS.includes(command as ScenarioCommand)) throw new Error(`${file}: "command" is one of "${SCENARIO_COMMANDS.join('", "')}" (got ${JSON.stringify(command)})`)
  if (raw.stdin !== undefined && (typeof raw.stdin !== 'string' || !existsSync(join(dir, raw.stdin)))) throw new Error(`${file}: "stdin" names a file of the scenario (got ${JSON.stringify(raw.stdin)})`)
  // A chat with nothing on its standard input would end before its first prompt.
  if (command === 'chat' && raw.stdin === undefined) throw new Error(`${file}: a "chat" scenario reads its prompts from "stdin": name the file`)
  const spec = raw.record
  const answered = fakeServerNames.filter((server) => Array.isArray(spec[server]))
  const record = typeof spec.model === 'string' ? { model: spec.model } : answered.length === 1 ? { fakeServer: answered[0]!, answers: spec[answered[0]!] as unknown[] } : undefined
  if (!record) throw new Error(`${file}: "record" needs "model" or exactly one of "${fakeServerNames.join('", "')}" with the scripted answers`)
  const products = isRecord(raw.products) ? (raw.products as Scenario['products']) : {}
  return { name, dir, command: command as ScenarioCommand, args: raw.args as string[], ...(typeof raw.stdin === 'string' && { stdin: raw.stdin }), record, exitCode: typeof raw.exitCode === 'number' ? raw.exitCode : 0, products }
}

export interface ScenarioOutcome {
  code: number | null
  stdout: string
  stderr: string
  /** Normalised session logs by lineage key. */
  sessions: Record<string, string>
}

/** Run the scenario's command in `mode`; record first when asked. */
export async function runScenario(scenario: Scenario, mode: ScenarioMode): Promise<ScenarioOutcome> {
  if (mode === 'record') await recordScenario(scenario)
  const sessionDir = tempDir('dsh-scenario-')
  const scratch = tempDir('dsh-scenario-scratch-')
  const products = await startProducts(scenario, scratch)
  let result
  try {
    result = await runDsh([...verbOf(scenario), '--model', `replay:${join(scenario.dir, 'recording')}`, '--session-dir', sessionDir, ...products.args(scenario.args)], { cwd: scenario.dir, env: products.env, timeoutMs: 60_000, ...inputOf(scenario) })
  } finally {
    await products.close()
    rmSync(scratch, { recursive: true, force: true })
  }
  const { logs, ids } = normalisedSessions(sessionDir, scenario.dir)
  const outcome: ScenarioOutcome = { code: result.code, stdout: normaliseText(result.stdout, sessionDir, scenario.dir, ids), stderr: result.stderr, sessions: logs }
  rmSync(sessionDir, { recursive: true, force: true })
  return outcome
}

export function expectedOf(scenario: Scenario): { stdout: string; sessions: Record<string, string> } | undefined {
  const dir = join(scenario.dir, 'expected')
  if (!existsSync(dir)) return undefined
  const sessionsDir = join(dir, 'sessions')
  const sessions: Record<string, string> = {}
  for (const name of existsSync(sessionsDir) ? readdirSync(sessionsDir) : []) sessions[name.replace(/\.jsonl$/, '')] = readFileSync(join(sessionsDir, name), 'utf8')
  return { stdout: readFileSync(join(dir, 'stdout.txt'), 'utf8'), sessions }
}

export function writeExpected(scenario: Scenario, outcome: ScenarioOutcome): void {
  const dir = join(scenario.dir, 'expected')
  rmSync(dir, { recursive: true, force: true })
  mkdirSync(join(dir, 'sessions'), { recursive: true })
  writeFileSync(join(dir, 'stdout.txt'), outcome.stdout)
  for (const [key, log] of Object.entries(outcome.sessions)) writeFileSync(join(dir, 'sessions', `${key}.jsonl`), log)
}

async function recordScenario(scenario: Scenario): Promise<void> {
  const recording = join(scenario.dir, 'recording')
  const sessionDir = tempDir('dsh-scenario-record-')
  let model: string
  let extraConfig: string[] = []
  const products = await startProducts(scenario, sessionDir)
  let close = () => products.close()
  if ('model' in scenario.record) model = scenario.record.model
  else {
    const fake = FAKE_MODEL_SERVERS[scenario.record.fakeServer]
    const server = await fake.start(scenario.record.answers)
    close = async () => {
      await server.close()
      await products.close()
    }
    const config = join(sessionDir, `${scenario.record.fakeServer}.yml`)
    writeFileSync(config, fake.entry(server.url))
    extraConfig = [config]
    model = fake.model
  }
  try {
    const args = mergeConfig(products.args(scenario.args), extraConfig, sessionDir, scenario.dir)
    const result = await runDsh([...verbOf(scenario), '--model', model, '--record', recording, '--session-dir', sessionDir, ...args], { cwd: scenario.dir, env: { [FAKE_MODEL_KEY_ENV]: 'fake-key', ...products.env }, timeoutMs: 60_000, ...inputOf(scenario) })
    if (result.code !== scenario.exitCode) throw new Error(`recording ${scenario.name} ended ${result.code}, expected ${scenario.exitCode}:\n${result.stderr}`)
  } finally {
    await close()
    rmSync(sessionDir, { recursive: true, force: true })
  }
}

/** The verb and its fixed flags: `dsh run --quiet` prints the answer alone; `dsh chat` from a pipe keeps its progress on stderr, which is not compared. */
function verbOf(scenario: Scenario): string[] {
  return scenario.command === 'run' ? ['run', '--quiet'] : scenario.command === 'workflow' ? ['workflow', 'run', '--quiet'] : ['chat']
}

function inputOf(scenario: Scenario): { input?: Buffer } {
  return scenario.stdin === undefined ? {} : { input: readFileSync(join(scenario.dir, scenario.stdin)) }
}

interface Products {
  env: NodeJS.ProcessEnv
  /** The command's arguments with its config pointed at the fake servers. */
  args(args: string[]): string[]
  close(): Promise<void>
}

/** Fake model servers for the scenario's product children, and where their programs find them. */
async function startProducts(scenario: Scenario, scratch: string): Promise<Products> {
  const closers: (() => Promise<void>)[] = []
  const env: NodeJS.ProcessEnv = {}
  let claudeEnv: Record<string, string> | undefined
  try {
    if (scenario.products.codex) {
      const server = await startFakeOpenAIResponses(scenario.products.codex)
      closers.push(() => server.close())
      const home = join(scratch, 'codex-home')
      mkdirSync(home, { recursive: true })
      // The offline recipe: no retries, update check, analytics or plugins; no key needed.
      writeFileSync(join(home, 'config.toml'), `model = "gpt-5.5"\nmodel_provider = "fake"\ncheck_for_update_on_startup = false\n\n[model_providers.fake]\nname = "fake"\nbase_url = "${server.url}"\nwire_api = "responses"\nrequest_max_retries = 0\nstream_max_retries = 0\n\n[analytics]\nenabled = false\n\n[features]\nplugins = false\n`)
      env.CODEX_HOME = home
      env.HOME = home
    }
    if (scenario.products.claudeCode) {
      const server = await startFakeAnthropicMessages(scenario.products.claudeCode)
      closers.push(() => server.close())
      const home = join(scratch, 'claude-home')
      const configDir = join(home, '.claude')
      mkdirSync(configDir, { recursive: true })
      writeFileSync(join(configDir, 'settings.json'), JSON.stringify({ permissions: { defaultMode: 'default' } }))
      claudeEnv = { ANTHROPIC_BASE_URL: server.url, ANTHROPIC_API_KEY: 'sk-ant-fake', CLAUDE_CODE_DISABLE_NONESSENTIAL_TRAFFIC: '1', CLAUDE_CODE_MAX_RETRIES: '0', HOME: home, CLAUDE_CONFIG_DIR: configDir, DISABLE_AUTOUPDATER: '1' }
    }
  } catch (error) {
    await Promise.all(closers.map((close) => close()))
    throw error
  }
  return {
    env,
    args: (args) => {
      const at = args.indexOf('--config')
      if (!claudeEnv || at < 0) return args
      // The Claude Code child's environment is the provider's `env`: point it at the fake.
      const entries = YAML.parse(readFileSync(resolve(scenario.dir, args[at + 1]), 'utf8')) as { name: string; config?: Record<string, unknown> }[]
      for (const entry of entries) {
        if (entry.name === '@dsh/subagent-claude-code') entry.config = { ...entry.config, env: { ...(entry.config?.env as Record<string, string> | undefined), ...claudeEnv } }
      }
      const file = join(scratch, 'products.yml')
      writeFileSync(file, YAML.stringify(entries))
      return [...args.slice(0, at), '--config', file, ...args.slice(at + 2)]
    },
    close: async () => {
      await Promise.all(closers.map((close) => close()))
    },
  }
}

/** The scenario's --config with the recording-only entries appended (one merged file). */
function mergeConfig(args: string[], extra: string[], scratch: string, scenarioDir: string): string[] {
  if (extra.length === 0) return args
  const at = args.indexOf('--config')
  const own = at >= 0 ? readFileSync(resolve(scenarioDir, args[at + 1]), 'utf8') : ''
  const merged = join(scratch, 'merged.yml')
  writeFileSync(merged, [own, ...extra.map((file) => readFileSync(file, 'utf8'))].join('\n'))
  return at >= 0 ? [...args.slice(0, at), '--config', merged, ...args.slice(at + 2)] : ['--config', merged, ...args]
}

interface StoredLine {
  kind?: string
  header?: { id: string; parentSession?: string; toolCallId?: string }
}

/**
 * Every session file in `sessionDir`, by lineage key (root, root.call_1, …), with ids,
 * times and paths replaced by stable placeholders.
 */
function normalisedSessions(sessionDir: string, scenarioDir: string): { logs: Record<string, string>; ids: Map<string, string> } {
  const files = readdirSync(sessionDir).filter((name) => name.endsWith('.jsonl'))
  const headers = new Map<string, NonNullable<StoredLine['header']>>()
  const texts = new Map<string, string>()
  for (const name of files) {
    const text = readFileSync(join(sessionDir, name), 'utf8')
    const first = JSON.parse(text.split('\n', 1)[0]) as StoredLine
    if (first.kind !== 'header' || !first.header) continue
    headers.set(first.header.id, first.header)
    texts.set(first.header.id, text)
  }
  const ids = new Map<string, string>()
  const keyOf = (id: string): string => {
    const known = ids.get(id)
    if (known) return known
    const header = headers.get(id)!
    const parent = header.parentSession !== undefined && headers.has(header.parentSession) ? keyOf(header.parentSession) : undefined
    const key = parent === undefined ? 'root' : `${parent}.${header.toolCallId ?? 'child'}`
    ids.set(id, key)
    return key
  }
  for (const id of headers.keys()) keyOf(id)
  const logs: Record<string, string> = {}
  for (const [id, text] of texts) {
    const lines = text
      .trimEnd()
      .split('\n')
      .map((line) => JSON.stringify(normaliseValue(JSON.parse(line) as unknown)))
    logs[ids.get(id)!] = `${normaliseText(lines.join('\n'), sessionDir, scenarioDir, ids)}\n`
  }
  return { logs, ids }
}

/** Times are not part of behaviour: every `ts`, `at` and `createdAt` becomes 0 / a fixed date. */
function normaliseValue(value: unknown): unknown {
  if (Array.isArray(value)) return value.map(normaliseValue)
  if (!isRecord(value)) return value
  const out: Record<string, unknown> = {}
  for (const [key, inner] of Object.entries(value)) {
    if (key === 'ts' && typeof inner === 'number') out[key] = 0
    // When a side effect was decided (a tool result's permission, an approval event).
    else if (key === 'at' && typeof inner === 'number') out[key] = 0
    else if (key === 'createdAt' && typeof inner === 'string') out[key] = '<time>'
    // How long a hook ran (a hook/run event).
    else if (key === 'durationMs' && typeof inner === 'number') out[key] = '<duration>'
    else if (key === 'cwd' && typeof inner === 'string') out[key] = '<cwd>'
    // A remote child's own id (a Codex thread, a Claude Code session) is minted afresh by each run.
    else if (key === 'childId' && typeof inner === 'string' && /^[\w-]+:[0-9a-f]{8}-[0-9a-f-]{27}$/.test(inner)) out[key] = inner.replace(/:.*/, ':<remote-id>')
    else out[key] = normaliseValue(inner)
  }
  return out
}

function normaliseText(text: string, sessionDir: string, scenarioDir: string, ids: Map<string, string>): string {
  let out = text.replaceAll(sessionDir, '<session-dir>').replaceAll(scenarioDir, '<scenario>')
  for (const [id, key] of ids) out = out.replaceAll(id, `<session:${key}>`)
  // Durations a progress or result line may carry.
  return out.replace(/\b\d+(\.\d+)?\s?(ms|s)\b/g, '<duration>')
}
