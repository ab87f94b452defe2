// Hook benchmark scenarios in a fresh process, like scenario.js: prints one JSON object.
//   hookedToolCall N   N calls of a side-effecting tool named bash (it does nothing, so the
//                      figures are the registry's, the broker's and the hooks' own) through
//                      the tool registry with the approval broker allowing them: with no
//                      hooks plugin; with @dsh/hooks composed and a PreToolUse hook whose
//                      matcher names another tool (the gate runs, no process starts); and,
//                      for N/50 calls, with a PreToolUse hook on Bash that exits 0 (a process
//                      started and waited for per call).
import { createHarness } from '@dsh/testkit/harness'
import { ApprovalService } from '@dsh/approvals'
import HooksPlugin from '@dsh/hooks'

const [name, arg] = process.argv.slice(2)

function cpuMicros() {
  const { user, system } = process.cpuUsage()
  return user + system
}

/** A harness with the broker (allowing) and a no-op side-effecting `bash`, plus the hooks plugin when `hooks` is given. */
async function callsWith(hooks) {
  const harness = await createHarness({ script: [{ reply: [{ text: 'unused' }] }] })
  await harness.plugin(ApprovalService, { default: 'allow' })
  if (hooks !== undefined) await harness.plugin(HooksPlugin, { hooks })
  harness.ctx.tools.register({ name: 'bash', description: 'does nothing', parameters: { type: 'object', properties: { command: { type: 'string' } } }, sideEffecting: true, execute: async () => 'ok' })
  const agent = await harness.agent()
  const signal = new AbortController().signal
  let id = 0
  const call = async () => {
    const outcome = await harness.ctx.tools.execute({ type: 'tool-call', id: `c${id++}`, name: 'bash', args: { command: `true ${id}` } }, { agent, signal })
    if (outcome.result.isError) throw new Error(`the call failed: ${outcome.result.content.map((part) => part.text).join('')}`)
  }
  return { harness, call }
}

/** Per call, after `warm` warm-up calls: CPU and wall, in microseconds. */
async function measure(call, count, warm) {
  for (let i = 0; i < warm; i++) await call()
  const cpu = cpuMicros()
  const wall = performance.now()
  for (let i = 0; i < count; i++) await call()
  return { cpu: (cpuMicros() - cpu) / count, wall: ((performance.now() - wall) * 1000) / count }
}

async function hookedToolCall(count) {
  const group = (matcher) => [{ matcher, hooks: [{ type: 'command', command: 'exit 0' }] }]
  const none = await callsWith(undefined)
  const bare = await measure(none.call, count, 200)
  await none.harness.dispose()
  const other = await callsWith({ PreToolUse: group('Write') })
  const unmatched = await measure(other.call, count, 200)
  await other.harness.dispose()
  const bash = await callsWith({ PreToolUse: group('Bash') })
  const matched = await measure(bash.call, Math.max(1, Math.floor(count / 50)), 5)
  await bash.harness.dispose()
  return {
    hook_none_call_cpu_us: bare.cpu,
    hook_unmatched_call_cpu_us: unmatched.cpu,
    hook_matched_call_ms: matched.wall / 1000,
  }
}

const scenarios = { hookedToolCall }
const figures = await scenarios[name](Number(arg))
process.stdout.write(`${JSON.stringify(figures)}\n`)
