import { readFile } from 'node:fs/promises'
import { join } from 'node:path'
import SessionJsonl from '@dsh/session-jsonl'
import { createHarness } from '@dsh/testkit/harness'
import { describe, expect, it } from 'vitest'
import { startProcess, tempDir } from './harness.js'
import { startSessionProcess, type SessionProcess } from './session-process.js'

/**
 * Each stage: the commands the writing process has run (and, unless `racing`, written to
 * the file) when it is killed with SIGKILL, and the events that leaves.
 */
const stages: { stage: string; commands: string[]; racing?: string }[] = [
  { stage: 'between turns', commands: ['turn 1', 'turn 2'] },
  { stage: 'mid-turn (the model request in flight)', commands: ['turn 1', 'start 2'] },
  { stage: 'mid-tool (a call without its result)', commands: ['turn 1', 'start 2', 'call'] },
  { stage: 'after a tool result, before the answer', commands: ['turn 1', 'start 2', 'call', 'result'] },
  { stage: 'while a write is in flight', commands: ['turn 1'], racing: 'turn 2' },
  { stage: 'right after creation', commands: [] },
]

/** The complete header and event lines in the file so far. */
async function linesOnDisk(file: string): Promise<{ header: boolean; events: number }> {
  const lines = (await readFile(file, 'utf8').catch(() => '')).split('\n').slice(0, -1)
  return { header: lines[0]?.startsWith('{"kind":"header"') ?? false, events: lines.filter((line) => line.startsWith('{"type"')).length }
}

describe('crash matrix: the writing process is killed with SIGKILL', () => {
  it.each(stages)('$stage: the file reads, and the session resumes into a completed turn that is saved too', async ({ commands, racing }) => {
    const dir = await tempDir()
    const writer: SessionProcess = startSessionProcess(dir, 'create')
    const id = (await writer.line('live ')).slice('live '.length)
    const file = join(dir, `${id}.jsonl`)
    for (const command of commands) await writer.command(command)
    // `did …` means appended to the session; wait until the file has it too, then kill.
    const written = commands.reduce((count, command) => count + ({ turn: 6, start: 3, call: 2, result: 1 } as Record<string, number>)[command.split(' ')[0]], 0)
    await expect.poll(() => linesOnDisk(file)).toEqual({ header: true, events: written })
    if (racing) writer.child.stdin!.write(racing + '\n')
    writer.child.kill('SIGKILL')
    expect(await writer.exited).toBe('SIGKILL')

    // It reads: every event that reached the disk, at most a torn tail dropped with a warning.
    const reader = await startProcess(dir)
    const stored = await reader.sessions.readStored(id)
    expect(stored!.events.length).toBeGreaterThanOrEqual(written)
    stored!.events.forEach((event, index) => expect(event.seq).toBe(index))

    // It resumes: the stale lock is taken over, an interrupted turn is closed, a new turn completes.
    // A resumed session continues its rule after the replies its log holds: room for every stage.
    const harness = await createHarness({ script: [{ reply: Array.from({ length: 8 }, () => ({ text: 'resumed' })) }] })
    try {
      await harness.plugin(SessionJsonl, { dir })
      const agent = await harness.agent({ sessionId: id })
      const result = await agent.followup('carry on')
      expect(result.reason).toBe('completed')
      const events = agent.session.events()
      await harness.dispose()
      const reread = await (await startProcess(dir)).sessions.readStored(id)
      expect(reread!.events).toEqual(events)
      expect(events.at(-1)).toMatchObject({ type: 'turn/end', reason: 'completed' })
    } finally {
      await harness.dispose()
    }
  })
})
