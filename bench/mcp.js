// MCP benchmark scenario in a fresh process, like scenario.js: prints one JSON object.
//   mcp N   - N calls of one MCP tool (mcp__srv__echo of the MCP client's fixture server, a
//             real stdio process on the SDK's server classes, read-only by its annotations
//             and readOnlyHints) through the tool registry, against N calls of a direct tool
//             that answers the same text: what one MCP round trip (JSON-RPC over a pipe to
//             another process and back) costs over a tool of this process; wall and this
//             process's CPU per call;
//           - 4 interleaved rounds (after one warm-up round) of `dsh mcp serve` (stdio) and of
//             `dsh acp`, each spawned through the shipped executable and timed from spawn to
//             its answer to the protocol's initialize, then ended by closing its stdin: what a
//             client waits before its first call (median of the rounds).
import { spawn } from 'node:child_process'
import { mkdtempSync, rmSync, writeFileSync } from 'node:fs'
import { tmpdir } from 'node:os'
import { dirname, join } from 'node:path'
import { fileURLToPath } from 'node:url'
import { createHarness } from '@dsh/testkit/harness'
import McpPlugin from '@dsh/mcp'

const here = dirname(fileURLToPath(import.meta.url))
const FIXTURE = join(here, '../packages/mcp/mcp/tests/fixtures/server.mjs')
const dsh = join(here, '../packages/cli/dsh/bin/dsh.cjs')
const [name, arg] = process.argv.slice(2)

function cpuMicros() {
  const { user, system } = process.cpuUsage()
  return user + system
}

/** Per call, after `warm` warm-up calls: CPU and wall, in microseconds. */
async function measure(call, count, warm) {
  for (let i = 0; i < warm; i++) await call(i)
  const cpu = cpuMicros()
  const wall = performance.now()
  for (let i = 0; i < count; i++) await call(i)
  return { cpu: (cpuMicros() - cpu) / count, wall: ((performance.now() - wall) * 1000) / count }
}

async function mcpToolCall(count) {
  const harness = await createHarness({ script: [{ reply: [{ text: 'unused' }] }] })
  await harness.plugin(McpPlugin, { servers: { srv: { command: process.execPath, args: [FIXTURE], readOnlyHints: true } } })
  harness.ctx.tools.register({ name: 'echo_direct', description: 'echo here', parameters: { type: 'object', properties: { text: { type: 'string' } }, required: ['text'] }, concurrencySafe: true, execute: async ({ text }) => `echo: ${text}` })
  const agent = await harness.agent()
  const signal = new AbortController().signal
  const caller = (tool) => async (i) => {
    const outcome = await harness.ctx.tools.execute({ type: 'tool-call', id: `c${i}`, name: tool, args: { text: `call ${i}` } }, { agent, signal, callId: `c${i}` })
    const answer = outcome.result.content.map((part) => part.text).join('')
    if (outcome.result.isError || answer !== `echo: call ${i}`) throw new Error(`${tool} failed: ${answer}`)
  }
  const direct = await measure(caller('echo_direct'), count, 200)
  const mcp = await measure(caller('mcp__srv__echo'), count, 200)
  await harness.dispose()
  return { mcp_call_us: mcp.wall, mcp_call_cpu_us: mcp.cpu, direct_call_us: direct.wall, direct_call_cpu_us: direct.cpu }
}

/** Wall milliseconds from spawn to the first line the process answers `request` with; then its stdin closes and it is awaited. */
function untilInitialized(args, request, env) {
  return new Promise((resolve, reject) => {
    const started = performance.now()
    const child = spawn(process.execPath, [dsh, ...args], { env, stdio: ['pipe', 'pipe', 'pipe'] })
    let out = ''
    let stderr = ''
    let answeredAt
    child.stderr.on('data', (chunk) => (stderr += chunk))
    child.stdout.on('data', (chunk) => {
      out += chunk
      if (answeredAt === undefined && out.includes('\n')) {
        answeredAt = performance.now()
        const answer = JSON.parse(out.slice(0, out.indexOf('\n')))
        if (answer.error || answer.id !== 1) reject(new Error(`dsh ${args.join(' ')} answered: ${out.slice(0, 300)}`))
        child.stdin.end()
      }
    })
    child.on('error', reject)
    child.on('exit', (code) => (answeredAt === undefined ? reject(new Error(`dsh ${args.join(' ')} exited ${code} before answering: ${stderr}`)) : resolve(answeredAt - started)))
    child.stdin.write(`${JSON.stringify({ jsonrpc: '2.0', id: 1, ...request })}\n`)
  })
}

async function mcpServeStartup(rounds) {
  const scratch = mkdtempSync(join(tmpdir(), 'dsh-bench-mcp-'))
  try {
    const script = join(scratch, 'child.yml')
    writeFileSync(script, '- reply:\n    - text: "done"\n')
    const env = { ...process.env, DSH_HOME: scratch }
    delete env.DSH_CODE_CACHE
    delete env.DEEPSEEK_API_KEY
    delete env.OPENAI_API_KEY
    const model = ['--model', `scripted:${script}`]
    const serve = () => untilInitialized(['mcp', 'serve', ...model], { method: 'initialize', params: { protocolVersion: '2025-06-18', capabilities: {}, clientInfo: { name: 'bench', version: '0' } } }, env)
    const acp = () => untilInitialized(['acp', ...model], { method: 'initialize', params: { protocolVersion: 1, clientCapabilities: {} } }, env)
    await serve()
    await acp()
    const served = []
    const acps = []
    for (let i = 0; i < rounds; i++) {
      served.push(await serve())
      acps.push(await acp())
    }
    const median = (values) => [...values].sort((a, b) => a - b)[values.length >> 1]
    return { mcp_serve_startup_ms: median(served), acp_startup_ms: median(acps) }
  } finally {
    rmSync(scratch, { recursive: true, force: true })
  }
}

if (name !== 'mcp') throw new Error(`bench/mcp.js: unknown scenario "${name}" (the only one is mcp)`)
const figures = { ...(await mcpToolCall(Number(arg))), ...(await mcpServeStartup(4)) }
process.stdout.write(`${JSON.stringify(figures)}\n`)
