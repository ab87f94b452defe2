/**
 * What hooks tell the agent, with real hook processes: `additionalContext` (and the plain
 * output of UserPromptSubmit) joins the model's input, named after its hook, and a hook's
 * own context never fires UserPromptSubmit again; `continue: false` refuses the call and
 * stops the agent's turn, saying why.
 */
import { afterEach, describe, expect, it } from 'vitest'
import { createHarness, type Harness } from '@dsh/testkit/harness'
import type { Agent } from '@dsh/agent'
import { ApprovalService } from '@dsh/approvals'
import { BashService } from '@dsh/bash'
import { textOf } from '@dsh/llm'
import { BashToolPlugin } from '@dsh/tool-bash'
import HooksPlugin, { type HooksConfig } from '@dsh/hooks'
import { cleanUp, group, tempDir } from './hooks-harness.js'
import { existsSync, readFileSync } from 'node:fs'
import { join } from 'node:path'

let harness: Harness | undefined
afterEach(async () => {
  await harness?.dispose()
  harness = undefined
  await cleanUp()
})

/** An agent whose model runs `true` through bash then answers (a prompt starting "next" is only answered), under `hooks`. */
/** What the hooks plugin logged (notes, warnings) in the current test. */
let notes: string[] = []

async function agentWith(hooks: Partial<HooksConfig>): Promise<Agent> {
  harness = await createHarness({
    script: [
      { when: { prompt: '^next' }, reply: [{ text: 'noted' }] },
      { reply: [{ call: { tool: 'bash', args: { command: 'true' } } }, { text: 'done' }] },
    ],
  })
  notes = []
  harness.ctx.logger.exporter({ colors: 0, levels: { default: 2 }, export: (message) => void notes.push(String(message.args.join(' '))) } as Parameters<typeof harness.ctx.logger.exporter>[0])
  await harness.plugin(BashService)
  await harness.plugin(BashToolPlugin)
  await harness.plugin(ApprovalService, { default: 'allow' })
  await harness.plugin(HooksPlugin, hooks)
  return harness.agent()
}

const userTexts = (agent: Agent) => agent.session.events().flatMap((event) => (event.type === 'user/message' ? [textOf(event.message.content)] : []))

describe('what hooks tell the agent', () => {
  it("a PreToolUse hook's additionalContext is the model's input at the next step, named after its hook", async () => {
    const context = `echo '{"hookSpecificOutput":{"hookEventName":"PreToolUse","additionalContext":"the build is red on main"}}'`
    const agent = await agentWith({ hooks: { PreToolUse: [group(context, 'Bash')] } })
    await agent.followup('go')
    const events = agent.session.events()
    const given = events.findIndex((event) => event.type === 'user/message' && textOf(event.message.content).includes('the build is red on main'))
    expect(given).toBeGreaterThan(events.findIndex((event) => event.type === 'tool/result'))
    expect(textOf((events[given] as { message: { content: never } }).message.content)).toBe(`[context from the PreToolUse hook "${context}"]\nthe build is red on main`)
    // The step after it is the model's answer, which read it.
    expect(events.slice(given).some((event) => event.type === 'assistant/message')).toBe(true)
  })

  it("continue: false refuses the call with its stopReason and stops the agent's turn", async () => {
    const stop = `echo '{"continue":false,"stopReason":"enough for today"}'`
    const agent = await agentWith({ hooks: { PreToolUse: [group(stop, 'Bash')] } })
    const result = await agent.followup('go')
    expect(result.reason).toBe('aborted')
    const outcome = agent.session.events().find((event) => event.type === 'tool/result')
    expect(outcome?.type === 'tool/result' && textOf(outcome.result.content)).toContain('enough for today')
    expect(agent.session.events().some((event) => event.type === 'assistant/message' && textOf(event.message.content) === 'done')).toBe(false)
    expect(notes).toContainEqual(expect.stringContaining(`PreToolUse hook "${stop}" stopped the agent (continue: false): enough for today`))
  })

  it("PostToolUse's additionalContext reaches the model; UserPromptSubmit's plain output does too, and never fires UserPromptSubmit again", async () => {
    const post = `echo '{"hookSpecificOutput":{"hookEventName":"PostToolUse","additionalContext":"formatted 3 files"}}'`
    const runs = join(await tempDir(), 'prompt-runs')
    const prompt = `cat > /dev/null; echo run >> ${runs}; echo 'remember the style guide'`
    const agent = await agentWith({ hooks: { PostToolUse: [group(post, 'Bash')], UserPromptSubmit: [group(prompt)] } })
    await agent.followup('go')
    // The hooks run beside the loop: their context is read at a later step or turn.
    await expect.poll(async () => {
      await agent.followup('next')
      const texts = userTexts(agent)
      return texts.some((text) => text.includes('formatted 3 files')) && texts.some((text) => text.includes('remember the style guide'))
    }, { timeout: 10_000 }).toBe(true)
    // UserPromptSubmit ran once per prompt, never for a hook's context (which would feed itself).
    const prompts = userTexts(agent).filter((text) => !text.startsWith('[context from the '))
    // Disposing waits for every hook still running (the plugin drains them): then the count is final.
    await harness!.dispose()
    harness = undefined
    expect(existsSync(runs) ? readFileSync(runs, 'utf8').trim().split('\n').length : 0).toBe(prompts.length)
  })
})
