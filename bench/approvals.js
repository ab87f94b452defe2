// Approval benchmark scenarios in a fresh process, like scenario.js: prints one JSON object.
//   approvalRoundTrip N     N approvals of an in-process grandchild's side effects, each
//                           put to a front-end that answers at once: the broker's own cost
//                           per request (the policy, the path, the pending record and its
//                           events, the front-end's turn), and the cost of a side effect
//                           no rule and no front-end decides (the default's answer)
//   approvalAcpRoundTrip N  N approvals of a grandchild two `dsh acp` processes down: its
//                           request crosses both processes to the root's front-end and
//                           back; measured in the grandchild's own session, from its tool
//                           call to its result (the front-end rejects, so no command runs)
import { mkdtempSync, readFileSync, readdirSync, rmSync, writeFileSync } from 'node:fs'
import { tmpdir } from 'node:os'
import { join } from 'node:path'
import { serviceInstance } from '@dsh/agent'
import { ApprovalService } from '@dsh/approvals'
import { AcpPlugin } from '@dsh/subagent-acp'
import { delegate, dshMain, parentWith } from './delegation-setup.js'

const [name, arg] = process.argv.slice(2)
const scratch = mkdtempSync(join(tmpdir(), 'dsh-bench-approvals-'))

function cpuMicros() {
  const { user, system } = process.cpuUsage()
  return user + system
}

async function approvalRoundTrip(count) {
  const { harness, parent } = await parentWith([[ApprovalService, {}]])
  const child = await harness.ctx.agents.create({ parent, meta: { parentSession: parent.id, delegationDepth: 1, provider: 'spawn', label: 'child' } })
  const grandchild = await harness.ctx.agents.create({ parent: child, meta: { parentSession: child.id, delegationDepth: 2, provider: 'spawn', label: 'grandchild' } })
  const signal = new AbortController().signal
  // Held once, as the broker's own gate and the providers reach it: a context look-up per request would be measured instead.
  const approvals = serviceInstance(harness.ctx.approvals)
  const ask = (index) => approvals.request({ agent: grandchild, tool: 'bash', args: { command: `make target-${index}` }, signal })
  // Nobody to ask (the default decides): what every side effect costs with no rule and no front-end.
  const removeDefault = approvals.setDefault('allow', 'bench')
  for (let i = 0; i < 200; i++) await ask(i)
  let cpu = cpuMicros()
  let wall = performance.now()
  for (let i = 0; i < count; i++) await ask(i)
  const unasked = { cpu: (cpuMicros() - cpu) / count, wall: ((performance.now() - wall) * 1000) / count }
  removeDefault()
  // A front-end answers each at once (distinct subjects: no earlier "always" answers them).
  harness.ctx.approvals.addFrontEnd({ name: 'bench', oneAtATime: true, ask: async () => ({ decision: 'allow-once', by: 'bench' }) })
  for (let i = 0; i < 200; i++) await ask(`warm-${i}`)
  cpu = cpuMicros()
  wall = performance.now()
  for (let i = 0; i < count; i++) await ask(`asked-${i}`)
  const asked = { cpu: (cpuMicros() - cpu) / count, wall: ((performance.now() - wall) * 1000) / count }
  await harness.dispose()
  return {
    approval_unasked_cpu_us: unasked.cpu,
    approval_inprocess_roundtrip_us: asked.wall,
    approval_inprocess_roundtrip_cpu_us: asked.cpu,
  }
}

async function approvalAcpRoundTrip(count) {
  const sessions = join(scratch, 'sessions')
  const script = join(scratch, 'script.yml')
  const commands = Array.from({ length: count }, (_, index) => `    - call: { tool: bash, args: { command: "true ${index}" } }`)
  writeFileSync(script, [
    '- when: { prompt: "grandchild work" }',
    '  reply:',
    ...commands,
    '    - text: "grandchild done"',
    '- when: { prompt: "child work" }',
    '  reply:',
    '    - call: { tool: subagent_acp, args: { description: "grandchild", prompt: "grandchild work" } }',
    '    - text: "child done"',
  ].join('\n'))
  // The middle `dsh acp` delegates to another `dsh acp` through its own acp provider.
  const config = join(scratch, 'middle.yml')
  writeFileSync(config, [
    '- id: subagent-acp',
    '  name: "@dsh/subagent-acp"',
    `  config: { providerName: acp, command: ${JSON.stringify(process.execPath)}, args: [${JSON.stringify(dshMain)}, acp, --model, ${JSON.stringify(`scripted:${script}`)}, --session-dir, ${JSON.stringify(sessions)}] }`,
    '- id: tool-subagent-acp',
    '  name: "@dsh/tool-subagent"',
    '  config: { provider: acp, toolName: subagent_acp }',
  ].join('\n'))
  const setup = await parentWith([
    [ApprovalService, {}],
    [AcpPlugin, { command: process.execPath, args: [dshMain, 'acp', '--config', config, '--model', `scripted:${script}`, '--session-dir', sessions] }],
  ])
  // The root's user rejects at once, so each round trip is the approval's alone (no command runs).
  setup.harness.ctx.approvals.addFrontEnd({ name: 'bench', oneAtATime: true, ask: async () => ({ decision: 'reject', by: 'bench', reason: 'measuring' }) })
  await delegate(setup, 'acp', 'child work')
  await setup.harness.dispose()
  const grandchild = readdirSync(sessions)
    .filter((file) => file.endsWith('.jsonl'))
    .map((file) => readFileSync(join(sessions, file), 'utf8').trim().split('\n').map((line) => JSON.parse(line)))
    .find(([header]) => header.header.delegationDepth === 2)
  if (!grandchild) throw new Error('the grandchild left no session')
  const called = new Map()
  const trips = []
  for (const event of grandchild.slice(1)) {
    if (event.type === 'tool/call') called.set(event.call.id, event.ts)
    if (event.type === 'tool/result' && called.has(event.result.callId)) {
      if (event.permission?.by !== 'bench (through the ACP client)') throw new Error(`a call was decided by ${event.permission?.by}, not the root's front-end`)
      trips.push(event.ts - called.get(event.result.callId))
    }
  }
  if (trips.length !== count) throw new Error(`expected ${count} decided calls, found ${trips.length}`)
  const sorted = [...trips].sort((a, b) => a - b)
  return { approval_two_acp_down_roundtrip_ms: sorted[sorted.length >> 1] }
}

const scenarios = { approvalRoundTrip, approvalAcpRoundTrip }
const run = scenarios[name]
if (!run) {
  console.error(`unknown scenario ${name}; known: ${Object.keys(scenarios).join(', ')}`)
  process.exit(2)
}
try {
  const figures = await run(Number(arg))
  process.stdout.write(`${JSON.stringify(figures)}\n`)
} finally {
  rmSync(scratch, { recursive: true, force: true })
}
