/**
 * dsh embedded in a program of its own: compose a runtime from plugin entries, create an
 * agent, delegate to a child through `ctx.subagents`, listen to the `subagent/*` events,
 * let the agent's own model delegate with the `subagent` tool, then dispose everything.
 *
 * Keyless: every session's model is `@dsh/llm-scripted`, playing the inline script below
 * (the parent answers at depth 0, its children at depth 1).
 */
import { mkdtempSync } from 'node:fs'
import { tmpdir } from 'node:os'
import { join } from 'node:path'
import { startRuntime, type PluginEntry } from '@dsh/cli'
import { outputText } from '@dsh/llm'
import type { SubagentRunEndInfo } from '@dsh/subagent'
import { runUntilQuiet } from '@dsh/tasks'

const script = [
  { when: { depth: 1, prompt: 'capital' }, reply: [{ text: 'Paris.' }] },
  { when: { depth: 1 }, reply: [{ text: 'A child, started by the program itself.' }] },
  {
    when: { depth: 0 },
    reply: [
      { text: 'Asking a child.', call: { tool: 'subagent', args: { description: 'look it up', prompt: 'What is the capital of France?' } } },
      { text: 'The child said: {{last_tool_result}}' },
    ],
  },
]

const entries: PluginEntry[] = [
  // The defaults (model registry, sessions, tools, agents, the spawn and fork providers, the
  // subagent tool, …) are composed first; these entries come after them.
  { id: 'llm-scripted', name: '@dsh/llm-scripted', config: { scripts: { embed: script } } },
]

const sessionDir = mkdtempSync(join(tmpdir(), 'dsh-embed-'))
const runtime = await startRuntime({ model: 'scripted:embed', sessionDir, extra: entries, ignoreDiscoveredConfig: true })
const { ctx } = runtime
ctx.on('subagent/start', (info) => console.log(`subagent/start  ${info.provider} child ${info.id} of ${info.parentId}`))
ctx.on('subagent/end', (info: SubagentRunEndInfo) => console.log(`subagent/end    ${info.provider} child ${info.id}: ${info.stopReason}`))

const agent = await ctx.agents.create({ meta: { origin: 'embed-example' } })
try {
  // 1. The program delegates, through the seam itself.
  const run = await ctx.subagents.start('spawn', {
    prompt: [{ type: 'text', text: 'Summarise this request in one line.' }],
    parent: agent,
    signal: AbortSignal.timeout(30_000),
    label: 'direct',
  })
  const result = await run.result
  await run.dispose()
  console.log(`direct delegation: ${result.stopReason}: ${outputText(result.output)}`)

  // 2. The agent's model delegates, with the subagent tool of the default composition.
  const turn = await runUntilQuiet(agent, 'Find out the capital of France.', { tasks: ctx.get('tasks') })
  console.log(`agent turn: ${turn.last.reason}: ${outputText(turn.output)}`)
  console.log(`sessions: ${sessionDir}`)
} finally {
  await agent.dispose()
  await runtime.dispose()
}
