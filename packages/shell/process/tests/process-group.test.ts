import { spawn } from 'node:child_process'
import { describe, expect, it } from 'vitest'
import { exists, goneWithin, groupHasLiveMembers, processAlive, signalGroup, terminateGroup } from '@dsh/process'

/** `sh -c script` leading its own process group; resolves with it and the first line it prints. */
async function group(script: string): Promise<{ pgid: number; line: string }> {
  const child = spawn('sh', ['-c', script], { detached: true, stdio: ['ignore', 'pipe', 'ignore'] })
  child.stdout.setEncoding('utf8')
  const line = await new Promise<string>((resolve) => {
    let text = ''
    child.stdout.on('data', (chunk: string) => {
      text += chunk
      if (text.includes('\n')) resolve(text.slice(0, text.indexOf('\n')))
    })
  })
  return { pgid: child.pid!, line }
}

describe('process groups', () => {
  it('terminateGroup stops every member and resolves true once none runs', async () => {
    const { pgid, line } = await group('sleep 30 & echo $!; wait')
    expect(await groupHasLiveMembers(pgid)).toBe(true)
    expect(await terminateGroup(pgid, 1_000)).toBe(true)
    expect(await groupHasLiveMembers(pgid)).toBe(false)
    expect(await processAlive(Number(line))).toBe(false)
  })

  it('terminateGroup escalates to SIGKILL after the grace period for members that ignore SIGTERM', async () => {
    const { pgid } = await group('trap "" TERM; echo ready; while :; do sleep 0.05; done')
    const started = Date.now()
    expect(await terminateGroup(pgid, 200)).toBe(true)
    expect(Date.now() - started).toBeGreaterThanOrEqual(190)
    expect(await groupHasLiveMembers(pgid)).toBe(false)
  })

  it('a group whose killed members are zombies has no live members, though kill(-pgid, 0) may still find it', async () => {
    const { pgid, line } = await group('sleep 30 & echo $!; exec sleep 30')
    signalGroup(pgid, 'SIGKILL')
    expect(await goneWithin(() => groupHasLiveMembers(pgid), 2_000)).toBe(true)
    expect(await processAlive(Number(line))).toBe(false)
    // Where PID 1 never reaps, the orphaned zombie keeps the group "existing".
    if (exists(Number(line))) expect(exists(-pgid)).toBe(true)
  })

  it('signalling a group that is already gone is not an error', async () => {
    const { pgid } = await group('echo done')
    expect(await goneWithin(() => groupHasLiveMembers(pgid), 2_000)).toBe(true)
    expect(() => signalGroup(pgid, 'SIGTERM')).not.toThrow()
  })
})
