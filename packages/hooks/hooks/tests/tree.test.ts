/**
 * Hooks for the whole in-process tree: a root's guard refuses a spawned child's call, and
 * SubagentStart/SubagentStop name each child by its id and its path from the root.
 */
import { existsSync, mkdirSync } from 'node:fs'
import { join } from 'node:path'
import { afterEach, describe, expect, it } from 'vitest'
import { createDelegationHarness, type DelegationHarness } from '@dsh/testkit/delegation'
import { ApprovalService } from '@dsh/approvals'
import { BashService } from '@dsh/bash'
import HooksPlugin from '@dsh/hooks'
import { SpawnPlugin } from '@dsh/subagent-spawn'
import { BashToolPlugin } from '@dsh/tool-bash'
import { SubagentToolPlugin } from '@dsh/tool-subagent'
import { appendInput, cleanUp, group, inputsIn, tempDir } from './hooks-harness.js'

let harness: DelegationHarness | undefined

afterEach(async () => {
  await harness?.dispose()
  harness = undefined
  await cleanUp()
})

describe('the in-process tree', () => {
  it('a guard configured once refuses a child\'s call; SubagentStart and SubagentStop name the child and its path', async () => {
    const dir = await tempDir()
    const log = join(dir, 'children.jsonl')
    const record = appendInput(log)
    harness = await createDelegationHarness({
      script: [
        { when: { prompt: '^survey' }, reply: [{ call: { tool: 'bash', args: { command: `rm -rf ${dir}/keep` } } }, { text: 'child: {{last_tool_result}}' }] },
        { when: { depth: 0 }, reply: [{ call: { tool: 'subagent', args: { description: 'survey', prompt: 'survey the tree' } } }, { text: 'root: {{last_tool_result}}' }] },
      ],
      plugins: [
        BashService,
        BashToolPlugin,
        [ApprovalService, { default: 'allow' }],
        SpawnPlugin,
        [SubagentToolPlugin, { provider: 'spawn' }],
        [HooksPlugin, { hooks: { PreToolUse: [group(`grep -q 'rm -rf' && { echo 'no rm -rf in this tree' >&2; exit 2; }; exit 0`, 'Bash')], SubagentStart: [group(record)], SubagentStop: [group(record)] } }],
      ],
    })
    mkdirSync(join(dir, 'keep'))
    const root = await harness.agent()
    await root.followup('go')
    expect(existsSync(join(dir, 'keep'))).toBe(true)
    const answer = root.session.events().flatMap((event) => (event.type === 'assistant/message' ? [JSON.stringify(event.message.content)] : [])).join('\n')
    expect(answer).toContain('no rm -rf in this tree')
    await expect.poll(() => inputsIn(log).length).toBe(2)
    const [start, stop] = [...inputsIn(log)].sort((a, b) => String(a.hook_event_name).localeCompare(String(b.hook_event_name)))
    expect(start).toMatchObject({ hook_event_name: 'SubagentStart', agent_path: 'dsh test/spawn "survey"', session_id: root.id })
    expect(start!.agent_id).not.toBe(root.id)
    expect(stop).toMatchObject({ hook_event_name: 'SubagentStop', agent_id: start!.agent_id, agent_path: 'dsh test/spawn "survey"', stop_reason: 'completed' })
  })
})
