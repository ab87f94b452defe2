/**
 * The observing events' hook runs in the session: they run beside the loop, so each is
 * written when its agent is disposed (before the session is released), in the order the
 * events fired and the hooks are configured, whichever finished first: the log is the same
 * from run to run.
 */
import { afterEach, describe, expect, it } from 'vitest'
import { cleanUp, group, runWithHooks, tempDir } from './hooks-harness.js'

afterEach(cleanUp)

describe('recorded observing runs', () => {
  it('PostToolUse runs are hook/run events written at the agent\'s disposal, in firing and configuration order, not finishing order', async () => {
    const dir = await tempDir()
    // The first hook finishes last on the first call, and first on the second.
    const slowFirst = `grep -q one && sleep 0.3; touch ${dir}/a; exit 0`
    const fastFirst = `if grep -q two; then sleep 0.3; exit 3; fi; exit 0`
    const run = await runWithHooks(['echo one', 'echo two'], { hooks: { PostToolUse: [group(slowFirst, 'Bash'), group(fastFirst, 'Bash')] } })
    const callIds = run.agent.session.events().flatMap((event) => (event.type === 'tool/call' ? [event.call.id] : []))
    await run.agent.dispose()
    const events = run.agent.session.events()
    const runs = events.flatMap((event, index) => (event.type === 'hook/run' ? [{ index, ...event }] : []))
    expect(runs.map((recorded) => [recorded.event, recorded.callId, recorded.command, recorded.exitCode])).toEqual([
      ['PostToolUse', callIds[0], slowFirst, 0],
      ['PostToolUse', callIds[0], fastFirst, 0],
      ['PostToolUse', callIds[1], slowFirst, 0],
      ['PostToolUse', callIds[1], fastFirst, 3],
    ])
    // After everything of the turn: none lands between its events.
    const turnEnd = events.findIndex((event) => event.type === 'turn/end')
    expect(runs.every((recorded) => recorded.index > turnEnd)).toBe(true)
    expect(runs[3]!.note).toContain('exit')
  })
})
