/**
 * What each command loads. The bundled CLI runs every module inside it only when first
 * imported, so "loaded" means "its top level ran": V8's coverage (NODE_V8_COVERAGE) names
 * each bundled module's wrapper function, with a count above zero once it ran, and lists
 * every file loaded from disk (the SDKs kept out of the bundle). Optional providers, their
 * SDKs and the demo's and tests' helpers must not be on the run path.
 */
import { mkdtempSync, readdirSync, readFileSync, writeFileSync } from 'node:fs'
import { dirname, join, relative } from 'node:path'
import { fileURLToPath } from 'node:url'
import { describe, expect, it } from 'vitest'
import { dshBin, dshBundle, repoRoot, runDsh, tempDir, type CliResult } from './cli.js'

interface CoverageFunction {
  functionName: string
  ranges: { count: number }[]
}
interface CoverageScript {
  url: string
  functions: CoverageFunction[]
}

/** Every module a dsh process loaded, as a path from the repository root (`packages/core/llm/dist/x.js`, `node_modules/openai/index.js`). */
async function loadedBy(args: string[], options: { env?: NodeJS.ProcessEnv } = {}): Promise<{ result: CliResult; modules: string[] }> {
  const coverage = mkdtempSync(join(tempDir('dsh-coverage-'), 'v8-'))
  const result = await runDsh(args, { env: { ...options.env, NODE_V8_COVERAGE: coverage } })
  const modules = new Set<string>()
  for (const file of readdirSync(coverage)) {
    const scripts = (JSON.parse(readFileSync(join(coverage, file), 'utf8')) as { result: CoverageScript[] }).result
    for (const script of scripts) {
      if (!script.url.startsWith('file:')) continue
      const path = relative(repoRoot, fileURLToPath(script.url))
      // The bundle and its side bundles (dsh-otel.cjs) name their modules the same way.
      if (dirname(fileURLToPath(script.url)) !== dirname(dshBundle)) {
        modules.add(path)
        continue
      }
      // Inside a bundle: each module is wrapped in a function named after its source path.
      for (const fn of script.functions) {
        if (/\.(c|m)?js$/.test(fn.functionName) && fn.ranges[0].count > 0) modules.add(fn.functionName)
      }
    }
  }
  return { result, modules: [...modules] }
}

/**
 * The built-in modules a dsh process loaded (`NativeModule child_process`, …): Node's own
 * list, written at exit by a module preloaded through NODE_OPTIONS.
 */
async function builtinsLoadedBy(args: string[], input?: string): Promise<{ result: CliResult; builtins: string[] }> {
  const dir = tempDir('dsh-builtins-')
  const list = join(dir, 'loaded.json')
  const recorder = join(dir, 'record-builtins.cjs')
  writeFileSync(recorder, `process.on('exit', () => require('node:fs').writeFileSync(${JSON.stringify(list)}, JSON.stringify(process.moduleLoadList)))\n`)
  const result = await runDsh(args, { env: { NODE_OPTIONS: `--require ${recorder}` }, ...(input !== undefined && { input }) })
  const builtins = (JSON.parse(readFileSync(list, 'utf8')) as string[]).filter((name) => name.startsWith('NativeModule ')).map((name) => name.slice('NativeModule '.length))
  return { result, builtins }
}

/** The package a module path belongs to: `@dsh/llm` for packages/core/llm/…, `openai` for node_modules/openai/…. */
function packageOf(path: string): string {
  const parts = path.split('/')
  if (parts[0] === 'packages') return parts[1] === 'cli' ? '@dsh/cli' : `@dsh/${parts[2]}`
  const at = parts.lastIndexOf('node_modules')
  if (at < 0) return path
  return parts[at + 1].startsWith('@') ? `${parts[at + 1]}/${parts[at + 2]}` : parts[at + 1]
}

/** Loaded by no command unless a composition or verb asks for it. */
const OPTIONAL = [
  '@dsh/testkit',
  'openai',
  '@a2a-js/sdk',
  'express',
  '@anthropic-ai/claude-agent-sdk',
  '@anthropic-ai/sdk',
  '@modelcontextprotocol/sdk',
  '@dsh/mcp',
  '@dsh/mcp-server',
  '@dsh/hooks',
  '@dsh/subagent-a2a',
  '@dsh/a2a-server',
  '@dsh/subagent-codex',
  '@dsh/subagent-claude-code',
  '@dsh/subagent-queue',
  '@dsh/queue-worker',
  '@dsh/ui-server',
  'playwright-core',
  'bullmq',
  'ioredis',
  '@dsh/tracing',
]

/** Whether a package is one of OpenTelemetry's (loaded only when tracing is on). */
const isOpenTelemetry = (name: string) => name.startsWith('@opentelemetry/')

describe('what dsh loads', () => {
  it('dsh run with a scripted model loads the run path, and no SDK of a provider it does not use', async () => {
    const { result, modules } = await loadedBy(['run', '--model', 'scripted:examples/hello.yml', '--session-dir', tempDir(), '--quiet', 'hello'])
    expect(result.code, result.stderr).toBe(0)
    expect(result.stdout).toContain('Hello! I am dsh')
    const packages = new Set(modules.map(packageOf))
    // The recorder works: it saw the CLI, the scripted adapter, and the OpenAI and Anthropic
    // plugins the default composition loads (for deepseek:, openai: and anthropic: models)
    // without their SDKs (OPTIONAL below).
    expect(modules).toContain('packages/cli/dsh/dist/run.js')
    expect(packages).toContain('@dsh/llm-scripted')
    expect(packages).toContain('@dsh/llm-openai')
    expect(packages).toContain('@dsh/llm-anthropic')
    expect([...packages].filter((name) => [...OPTIONAL, '@agentclientprotocol/sdk', '@dsh/acp-server', '@dsh/subagent-acp'].includes(name) || isOpenTelemetry(name))).toEqual([])
    expect(modules.filter((path) => path.startsWith('packages/cli/dsh/dist/commands/'))).toEqual([])
    // The interactive session (dsh chat: its line editor, history, slash commands) is that verb's alone.
    expect(modules.filter((path) => path.startsWith('packages/cli/dsh/dist/chat/'))).toEqual([])
    // No agents directory and no config naming it: agent definitions cost nothing.
    expect(packages).not.toContain('@dsh/agent-definitions')
    // Tools register with a pre-generated schema check; ajv loads only when a tool is first called.
    expect(packages).toContain('@dsh/tools')
    expect(packages).not.toContain('ajv')
  })

  it('a run that starts no process does not load node:child_process; a bash call loads it', async () => {
    const quiet = await builtinsLoadedBy(['run', '--model', 'scripted:examples/hello.yml', '--session-dir', tempDir(), '--quiet', 'hello'])
    expect(quiet.result.code, quiet.result.stderr).toBe(0)
    expect(quiet.builtins).toContain('fs')
    expect(quiet.builtins).not.toContain('child_process')
    const dir = tempDir()
    const script = join(dir, 'runs-bash.yml')
    writeFileSync(script, ['- when: { depth: 0 }', '  reply:', '    - call: { tool: bash, args: { command: "true" } }', '    - text: "ran"', ''].join('\n'))
    const bash = await builtinsLoadedBy(['run', '--model', `scripted:${script}`, '--permission', 'allow', '--session-dir', dir, '--quiet', 'go'])
    expect(bash.result.code, bash.result.stderr).toBe(0)
    expect(bash.result.stdout).toContain('ran')
    expect(bash.builtins).toContain('child_process')
  })

  it('the bundle holds none of the SDKs kept outside it: a start reads and decodes every byte of it, run or not', () => {
    const bundle = readFileSync(dshBundle, 'latin1')
    // Each bundled module is wrapped in a function named after its path (node_modules/<package>/…).
    for (const name of ['bullmq', 'ioredis', 'openai', '@anthropic-ai/sdk', '@modelcontextprotocol/sdk', '@a2a-js/sdk', 'express']) expect(bundle, name).not.toContain(`node_modules/${name}/`)
    expect(bundle).toContain('node_modules/yaml/')
  })

  it('dsh chat loads its session modules (the check above can see them), and without a terminal reads its prompts from stdin (here closed: none)', async () => {
    const { result, modules } = await loadedBy(['chat', '--model', 'scripted:examples/hello.yml', '--session-dir', tempDir()])
    expect(result.code, result.stderr).toBe(0)
    expect(result.stderr).toContain('prompts from standard input')
    expect(modules).toContain('packages/cli/dsh/dist/chat/session.js')
  })

  it('a run whose model calls a tool loads ajv for that call', async () => {
    const dir = tempDir()
    const script = join(dir, 'calls-a-tool.yml')
    writeFileSync(script, ['- when: { depth: 0 }', '  reply:', '    - call: { tool: task_list, args: {} }', '    - text: "listed"', ''].join('\n'))
    const { result, modules } = await loadedBy(['run', '--model', `scripted:${script}`, '--session-dir', dir, '--quiet', 'go'])
    expect(result.code, result.stderr).toBe(0)
    expect(result.stdout).toContain('listed')
    expect(new Set(modules.map(packageOf))).toContain('ajv')
  })

  it('dsh acp loads the ACP server and its SDK, and no other optional part', async () => {
    // stdin is closed at once: the server starts, sees EOF and exits 0.
    const { result, modules } = await loadedBy(['acp', '--model', 'scripted:examples/hello.yml', '--session-dir', tempDir()])
    expect(result.code, result.stderr).toBe(0)
    const packages = new Set(modules.map(packageOf))
    expect(packages).toContain('@dsh/acp-server')
    expect(packages).toContain('@agentclientprotocol/sdk')
    expect([...packages].filter((name) => OPTIONAL.includes(name) || isOpenTelemetry(name))).toEqual([])
    expect(modules.filter((path) => path.startsWith('packages/cli/dsh/dist/commands/'))).toEqual([])
  })

  it("dsh acp finds no package on disk as it starts: its agentInfo version is the build's, so Node's package resolver never loads", async () => {
    // Resolving a package by name (its exports map) loads Node's ESM resolver: about 2 ms of
    // every ACP child's start, which dsh run does not pay either.
    const initialize = { jsonrpc: '2.0', id: 1, method: 'initialize', params: { protocolVersion: 1, clientCapabilities: {} } }
    const acp = await builtinsLoadedBy(['acp', '--model', 'scripted:examples/hello.yml', '--session-dir', tempDir()], `${JSON.stringify(initialize)}\n`)
    expect(acp.result.code, acp.result.stderr).toBe(0)
    const { version } = JSON.parse(readFileSync(join(repoRoot, 'packages/cli/dsh/package.json'), 'utf8')) as { version: string }
    expect(JSON.parse(acp.result.stdout.split('\n')[0])).toMatchObject({ id: 1, result: { agentInfo: { name: 'dsh', version } } })
    expect(acp.builtins).toContain('fs')
    expect(acp.builtins).not.toContain('internal/modules/esm/resolve')
  })

  it('a composed provider that reads its own package files (the acp provider, its package.json) is found without loading the package resolver', async () => {
    // The bundle finds an installed @dsh package as require.resolve would, without it:
    // resolving a package with an exports map loads Node's ESM resolver (about 2 ms).
    const dir = tempDir()
    const config = join(dir, 'dsh.yml')
    writeFileSync(config, ['- name: "@dsh/subagent-acp"', '  config: { command: /nonexistent/acp-agent }', ''].join('\n'))
    const run = await builtinsLoadedBy(['run', '--config', config, '--model', 'scripted:examples/hello.yml', '--session-dir', dir, '--quiet', 'hello'])
    expect(run.result.code, run.result.stderr).toBe(0)
    expect(run.result.stdout).toContain('Hello! I am dsh')
    expect(run.builtins).toContain('fs')
    expect(run.builtins).not.toContain('internal/modules/esm/resolve')
  })

  it('a composed acp provider loads the ACP SDK with its first child, not before: a run that delegates nothing to it does not pay for it', async () => {
    const dir = tempDir()
    const child = join(dir, 'child.yml')
    writeFileSync(child, '- reply:\n    - text: "Paris."\n')
    const delegating = join(dir, 'delegating.yml')
    writeFileSync(delegating, '- reply:\n    - call: { tool: subagent_acp, args: { description: "ask", prompt: "capital of France?" } }\n    - text: "done"\n')
    const config = join(dir, 'dsh.yml')
    writeFileSync(config, [
      '- id: subagent-acp',
      '  name: "@dsh/subagent-acp"',
      `  config: { providerName: acp, command: ${JSON.stringify(process.execPath)}, args: [${JSON.stringify(dshBin)}, acp, --model, ${JSON.stringify(`scripted:${child}`)}], permission: reject }`,
      '- id: tool-subagent-acp',
      '  name: "@dsh/tool-subagent"',
      '  config: { provider: acp, toolName: subagent_acp }',
      '',
    ].join('\n'))
    const idle = await loadedBy(['run', '--config', config, '--model', 'scripted:examples/hello.yml', '--session-dir', dir, '--quiet', 'hello'])
    expect(idle.result.code, idle.result.stderr).toBe(0)
    const idlePackages = new Set(idle.modules.map(packageOf))
    expect(idlePackages).toContain('@dsh/subagent-acp')
    expect(idlePackages).not.toContain('@agentclientprotocol/sdk')
    const sessions = tempDir()
    const used = await loadedBy(['run', '--config', config, '--model', `scripted:${delegating}`, '--session-dir', sessions, '--quiet', 'go'])
    expect(used.result.code, used.result.stderr).toBe(0)
    // The child answered: its words are the tool result in the root's session.
    const logs = readdirSync(sessions).filter((name) => name.endsWith('.jsonl')).map((name) => readFileSync(join(sessions, name), 'utf8'))
    const root = logs.find((log) => !(JSON.parse(log.split('\n')[0]) as { header: { parentSession?: string } }).header.parentSession)
    expect(root).toContain('Paris.')
    expect(new Set(used.modules.map(packageOf))).toContain('@agentclientprotocol/sdk')
  })

  it('a composed a2a provider loads the A2A SDK as it first reaches a worker, not before: a run that delegates nothing to it does not pay for it', async () => {
    const dir = tempDir()
    const config = join(dir, 'dsh.yml')
    // Port 9 on loopback: nothing listens, so reaching the worker fails at once, after the SDK loaded.
    writeFileSync(config, ['- id: subagent-a2a', '  name: "@dsh/subagent-a2a"', '  config: { providerName: a2a, urls: ["http://127.0.0.1:9"] }', '- id: tool-subagent-a2a', '  name: "@dsh/tool-subagent"', '  config: { provider: a2a, toolName: subagent_a2a }', ''].join('\n'))
    const idle = await loadedBy(['run', '--config', config, '--model', 'scripted:examples/hello.yml', '--session-dir', dir, '--quiet', 'hello'])
    expect(idle.result.code, idle.result.stderr).toBe(0)
    const idlePackages = new Set(idle.modules.map(packageOf))
    expect(idlePackages).toContain('@dsh/subagent-a2a')
    expect(idlePackages).not.toContain('@a2a-js/sdk')
    const delegating = join(dir, 'delegating.yml')
    writeFileSync(delegating, '- reply:\n    - call: { tool: subagent_a2a, args: { description: "ask", prompt: "capital of France?" } }\n    - text: "done"\n')
    const used = await loadedBy(['run', '--config', config, '--model', `scripted:${delegating}`, '--session-dir', dir, 'go'])
    expect(used.result.code, used.result.stderr).toBe(0)
    expect(used.result.stderr).toContain('did not answer at stage agent card')
    expect(new Set(used.modules.map(packageOf))).toContain('@a2a-js/sdk')
  })

  it('a composed queue provider loads BullMQ and ioredis with its first delegation, not before: a run that delegates nothing to it does not pay for them', async () => {
    const dir = tempDir()
    const config = join(dir, 'dsh.yml')
    writeFileSync(config, ['- id: subagent-queue', '  name: "@dsh/subagent-queue"', '  config: { redisUrlEnv: DSH_TEST_REDIS_URL, keyEnv: DSH_TEST_QUEUE_KEY }', '- id: tool-subagent-queue', '  name: "@dsh/tool-subagent"', '  config: { provider: queue, toolName: subagent_queue }', ''].join('\n'))
    // Port 9 on loopback: nothing listens, so the delegation fails at once, after both loaded.
    const env = { DSH_TEST_REDIS_URL: 'redis://127.0.0.1:9', DSH_TEST_QUEUE_KEY: 'k'.repeat(64) }
    const idle = await loadedBy(['run', '--config', config, '--model', 'scripted:examples/hello.yml', '--session-dir', dir, '--quiet', 'hello'], { env })
    expect(idle.result.code, idle.result.stderr).toBe(0)
    const idlePackages = new Set(idle.modules.map(packageOf))
    expect(idlePackages).toContain('@dsh/subagent-queue')
    expect(idlePackages).not.toContain('bullmq')
    expect(idlePackages).not.toContain('ioredis')
    const delegating = join(dir, 'delegating.yml')
    writeFileSync(delegating, '- reply:\n    - call: { tool: subagent_queue, args: { description: "ask", prompt: "capital of France?" } }\n    - text: "done"\n')
    const sessions = tempDir()
    const used = await loadedBy(['run', '--config', config, '--model', `scripted:${delegating}`, '--session-dir', sessions, '--quiet', 'go'], { env })
    expect(used.result.code, used.result.stderr).toBe(0)
    // The delegation reached for Redis: its refusal is the tool result in the session.
    const logs = readdirSync(sessions).filter((name) => name.endsWith('.jsonl')).map((name) => readFileSync(join(sessions, name), 'utf8'))
    expect(logs.join('\n')).toContain('cannot be reached')
    const usedPackages = new Set(used.modules.map(packageOf))
    expect(usedPackages).toContain('bullmq')
    expect(usedPackages).toContain('ioredis')
  })

  it('tracing loads @dsh/tracing and OpenTelemetry only when an OTEL_* variable turns it on', async () => {
    const off = await loadedBy(['run', '--model', 'scripted:examples/hello.yml', '--session-dir', tempDir(), '--quiet', 'hello'], { env: { OTEL_SERVICE_NAME: 'not-enough-to-trace' } })
    expect(off.result.code, off.result.stderr).toBe(0)
    expect([...new Set(off.modules.map(packageOf))].filter((name) => name === '@dsh/tracing' || isOpenTelemetry(name))).toEqual([])
    // Port 9 on loopback: nothing listens; the spans are dropped with one line, after the modules loaded.
    const on = await loadedBy(['run', '--model', 'scripted:examples/hello.yml', '--session-dir', tempDir(), '--quiet', 'hello'], { env: { OTEL_EXPORTER_OTLP_ENDPOINT: 'http://127.0.0.1:9' } })
    expect(on.result.code, on.result.stderr).toBe(0)
    expect(on.result.stderr).toMatch(/^dsh: tracing: 2 spans dropped/)
    const packages = new Set(on.modules.map(packageOf))
    expect(packages).toContain('@dsh/tracing')
    expect(packages).toContain('@opentelemetry/sdk-trace-base')
    expect(packages).toContain('@opentelemetry/exporter-trace-otlp-http')
  })

  it('an MCP server in the config loads the MCP client and its SDK (which no run without one loads)', async () => {
    const dir = tempDir()
    const config = join(dir, 'dsh.yml')
    // A server that cannot start: the client and the SDK loaded, and the run goes on with a warning.
    writeFileSync(config, ['- name: "@dsh/mcp"', '  config: { servers: { gone: { command: /nonexistent/mcp-server } } }', ''].join('\n'))
    const { result, modules } = await loadedBy(['run', '--config', config, '--model', 'scripted:examples/hello.yml', '--session-dir', dir, '--quiet', 'hello'])
    expect(result.code, result.stderr).toBe(0)
    expect(result.stderr).toMatch(/MCP server "gone" .*did not start/)
    const packages = new Set(modules.map(packageOf))
    expect(packages).toContain('@dsh/mcp')
    expect(packages).toContain('@modelcontextprotocol/sdk')
  })

  it('a hooks entry in the config loads @dsh/hooks (which no run without one loads), and its hook runs', async () => {
    const dir = tempDir()
    const config = join(dir, 'dsh.yml')
    const marker = join(dir, 'session-ended.json')
    writeFileSync(config, ['- name: "@dsh/hooks"', `  config: { hooks: { SessionEnd: [{ hooks: [{ type: command, command: "cat > ${marker}" }] }] } }`, ''].join('\n'))
    const { result, modules } = await loadedBy(['run', '--config', config, '--model', 'scripted:examples/hello.yml', '--session-dir', dir, '--quiet', 'hello'])
    expect(result.code, result.stderr).toBe(0)
    expect(new Set(modules.map(packageOf))).toContain('@dsh/hooks')
    expect(JSON.parse(readFileSync(marker, 'utf8'))).toMatchObject({ hook_event_name: 'SessionEnd', agent_path: 'dsh' })
  })

  it('an openai: model loads the OpenAI SDK when it makes its first request', async () => {
    const dir = tempDir()
    const config = join(dir, 'dsh.yml')
    // Port 9 on loopback: nothing listens, so the request fails at once, after the SDK loaded.
    writeFileSync(config, ['- id: llm-openai', '  name: "@dsh/llm-openai"', '  config: { baseURL: "http://127.0.0.1:9/v1", apiKeyEnv: DSH_TEST_OPENAI_KEY, maxRetries: 0 }', ''].join('\n'))
    const { result, modules } = await loadedBy(['run', '--config', config, '--model', 'openai:gpt-test', '--session-dir', dir, '--quiet', 'hello'], { env: { DSH_TEST_OPENAI_KEY: 'test-key' } })
    expect(result.code).toBe(1)
    expect(result.stderr).toContain('cannot reach http://127.0.0.1:9/v1')
    expect(new Set(modules.map(packageOf))).toContain('openai')
  })

  it('an anthropic: model loads the Anthropic SDK when it makes its first request', async () => {
    const dir = tempDir()
    const config = join(dir, 'dsh.yml')
    // Port 9 on loopback: nothing listens, so the request fails at once, after the SDK loaded.
    writeFileSync(config, ['- id: llm-anthropic', '  name: "@dsh/llm-anthropic"', '  config: { baseURL: "http://127.0.0.1:9", apiKeyEnv: DSH_TEST_ANTHROPIC_KEY, maxRetries: 0 }', ''].join('\n'))
    const { result, modules } = await loadedBy(['run', '--config', config, '--model', 'anthropic:claude-test', '--session-dir', dir, '--quiet', 'hello'], { env: { DSH_TEST_ANTHROPIC_KEY: 'test-key' } })
    expect(result.code).toBe(1)
    expect(result.stderr).toContain('cannot reach http://127.0.0.1:9')
    const packages = new Set(modules.map(packageOf))
    expect(packages).toContain('@anthropic-ai/sdk')
    expect(packages).not.toContain('openai')
  })

  it('plugins from disk load in the bundled CLI, as ES modules and as CommonJS', async () => {
    const dir = tempDir()
    writeFileSync(join(dir, 'esm-plugin.mjs'), "export default { name: 'esm-probe', apply(ctx) { ctx.logger('esm-probe').warn('ES module plugin started') } }\n")
    writeFileSync(join(dir, 'cjs-plugin.cjs'), "module.exports = { name: 'cjs-probe', apply(ctx) { ctx.logger('cjs-probe').warn('CommonJS plugin started') } }\n")
    writeFileSync(join(dir, 'dsh.yml'), ['- name: ./esm-plugin.mjs', '- name: ./cjs-plugin.cjs', ''].join('\n'))
    const result = await runDsh(['config', 'check', '--config', join(dir, 'dsh.yml')])
    expect(result.code, result.stderr).toBe(0)
    expect(result.stderr).toContain('ES module plugin started')
    expect(result.stderr).toContain('CommonJS plugin started')
    expect(result.stdout).toContain('./esm-plugin.mjs')
  })
})
