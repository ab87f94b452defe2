// The cost of live progress per child chunk, in a fresh process (run through bench/run.js).
// Prints one JSON object: { name: value, ... }.
//
// progress_chunk_ns: one text delta of a child reported into its run's progress channel
//   (coalescing, bounds, the timer, and the emission to one listener amortised over the
//   deltas), with 100 children streaming at once.
// progress_tool_event_ns: one tool-start or tool-end update the same way (each is checked
//   and copied with its display strings bounded).
// progress_session_chunk_ns: one text chunk of an in-process child's session followed into
//   its channel (the path spawn and fork children take: session listener → channel).
// The channel and the in-process follower are the subagent service's own parts (not its public face): measured directly.
import { ProgressChannel } from '../packages/subagent/subagent/dist/progress/channel.js'
import { followLocalChild } from '../packages/subagent/subagent/dist/progress/local.js'
import { Session } from '@dsh/session'

const [name, arg] = process.argv.slice(2)

function cpuNanos() {
  const { user, system } = process.cpuUsage()
  return (user + system) * 1000
}

const RUN = { runId: 'run-b', provider: 'bench', id: 'child', local: true, parentId: 'parent' }

/** 100 channels, one listener counting what reaches it, an emission interval of 10 ms. */
function channels(count) {
  let heard = 0
  const all = Array.from({ length: count }, (_, index) => {
    const channel = new ProgressChannel({ intervalMs: 10, emit: (info) => void (heard += info.updates.length), onMalformed: () => {} })
    channel.bind({ ...RUN, runId: `run-${index}`, id: `child-${index}` })
    return channel
  })
  return { all, heard: () => heard }
}

/** Report `perChild` updates made by `make` into each of 100 channels, in bursts between ticks. */
async function measure(perChild, make) {
  const { all, heard } = channels(100)
  const burst = 50
  // Warm-up: the same work once, unmeasured.
  for (let sent = 0; sent < perChild / 4; sent += burst) {
    for (const channel of all) for (let i = 0; i < burst; i++) channel.report(make(sent + i))
    await new Promise((resolve) => setImmediate(resolve))
  }
  const cpu = cpuNanos()
  for (let sent = 0; sent < perChild; sent += burst) {
    for (const channel of all) for (let i = 0; i < burst; i++) channel.report(make(sent + i))
    await new Promise((resolve) => setImmediate(resolve))
  }
  for (const channel of all) channel.close()
  const spent = cpuNanos() - cpu
  if (heard() === 0) throw new Error('nothing reached the listener')
  return spent / (perChild * all.length)
}

async function sessionChunks(perChild) {
  const { all } = channels(100)
  const sessions = all.map((channel, index) => {
    const session = new Session({ id: `s-${index}`, createdAt: new Date(0).toISOString(), cwd: '/' })
    session.append({ type: 'turn/start', turn: 1 })
    followLocalChild(session, channel)
    return session
  })
  const push = (count) => {
    for (let sent = 0; sent < count; sent++) for (const session of sessions) session.publish({ type: 'assistant/chunk', kind: 'text', text: `word${sent} ` })
  }
  push(perChild / 4)
  await new Promise((resolve) => setTimeout(resolve, 20))
  const cpu = cpuNanos()
  for (let sent = 0; sent < perChild; sent += 50) {
    push(50)
    await new Promise((resolve) => setImmediate(resolve))
  }
  for (const channel of all) channel.close()
  return (cpuNanos() - cpu) / (perChild * sessions.length)
}

async function progress(perChild) {
  return {
    progress_chunk_ns: await measure(perChild, (n) => ({ kind: 'text', text: `token${n} ` })),
    progress_tool_event_ns: await measure(perChild, (n) => (n % 2 === 0 ? { kind: 'tool-start', callId: `c${n}`, name: 'bash', args: `{"command":"ls ${n}"}` } : { kind: 'tool-end', callId: `c${n - 1}`, name: 'bash', ok: true })),
    progress_session_chunk_ns: await sessionChunks(perChild),
  }
}

if (name !== 'progress') {
  console.error(`unknown scenario ${name}; known: progress`)
  process.exit(2)
}
// A first pass warms every path up (the JIT sees all three before any is measured).
await progress(Number(arg) / 4)
process.stdout.write(`${JSON.stringify(await progress(Number(arg)))}\n`)
