import { afterEach, describe, expect, it } from 'vitest'
import { describeExit, processAlive, ProcessTree, type SpawnSpec } from '@dsh/process'

const trees: ProcessTree[] = []
afterEach(async () => {
  await Promise.all(trees.splice(0).map((tree) => tree.reap({ stdinGraceMs: 0, termGraceMs: 0 })))
})

function start(command: string, args: string[], extra: Partial<SpawnSpec> = {}): ProcessTree {
  const tree = new ProcessTree({ command, args, cwd: process.cwd(), env: process.env, ...extra })
  trees.push(tree)
  return tree
}

const sh = (script: string) => start('sh', ['-c', script])
const node = (script: string, extra: Partial<SpawnSpec> = {}) => start(process.execPath, ['-e', script], extra)

/** The first line the tree writes to stdout (the fixtures print a pid there). */
function firstLine(tree: ProcessTree): Promise<string> {
  return new Promise((resolve, reject) => {
    let text = ''
    tree.child.stdout!.setEncoding('utf8')
    tree.child.stdout!.on('data', (chunk: string) => {
      text += chunk
      if (text.includes('\n')) resolve(text.slice(0, text.indexOf('\n')))
    })
    tree.child.stdout!.once('end', () => reject(new Error(`stdout ended before a line: ${JSON.stringify(text)}`)))
  })
}

describe('a process tree', () => {
  it('a program that cannot be spawned rejects spawned, and reaping it resolves at once', async () => {
    const tree = start('dsh-no-such-program-anywhere', [])
    await expect(tree.spawned).rejects.toMatchObject({ code: 'ENOENT' })
    expect(tree.pid).toBeUndefined()
    await tree.reap({ stdinGraceMs: 10_000, termGraceMs: 10_000 })
  })

  it('exitWithin reports the exit and lets stderr drain; the tail is bounded and marks the cut', async () => {
    const tree = node("process.stderr.write('x'.repeat(100) + '\\nlast words\\n'); process.exit(3)", { stderrTailChars: 20 })
    await tree.spawned
    const exit = await tree.exitWithin(5_000)
    expect(exit).toEqual({ code: 3, signal: null })
    expect(describeExit(exit!)).toBe('exited with code 3')
    expect(tree.stderr()).toBe('…xxxxxxxx\nlast words')
  })

  it('exitWithin gives up after its time when the child lives on', async () => {
    const tree = sh('sleep 30')
    await tree.spawned
    expect(await tree.exitWithin(50)).toBeUndefined()
    expect(tree.exit).toBeUndefined()
  })

  it('a child that exits at the end of its input is reaped by closing stdin, before any signal', async () => {
    const tree = sh('cat >/dev/null; exit 0')
    await tree.spawned
    // Graces past the test's timeout: the reaping ends in time only because closing stdin ended the child.
    await tree.reap({ stdinGraceMs: 60_000, termGraceMs: 60_000 })
    expect(tree.exit).toEqual({ code: 0, signal: null })
  })

  it('escalates to SIGTERM and then SIGKILL for a tree that ignores both its stdin and SIGTERM, grandchildren included', async () => {
    const tree = sh('trap "" TERM; sleep 30 & echo $!; while :; do sleep 0.05; done')
    const grandchild = Number(await firstLine(tree))
    const started = Date.now()
    const reaping = tree.reap({ stdinGraceMs: 200, termGraceMs: 300 })
    expect(tree.reap({ stdinGraceMs: 0, termGraceMs: 0 })).toBe(reaping)
    await reaping
    expect(Date.now() - started).toBeGreaterThanOrEqual(490)
    expect(tree.exit).toEqual({ code: null, signal: 'SIGKILL' })
    expect(describeExit(tree.exit!)).toBe('was killed by SIGKILL')
    expect(await processAlive(grandchild)).toBe(false)
  })

  it('a descendant that left the group (setsid) is reaped too, even after the leader exited', async () => {
    const tree = node("const c = require('node:child_process').spawn('sleep', ['30'], { detached: true, stdio: 'ignore' }); c.unref(); console.log(c.pid); process.stdin.resume()")
    const escaped = Number(await firstLine(tree))
    expect(await processAlive(escaped)).toBe(true)
    await tree.reap({ stdinGraceMs: 300, termGraceMs: 1_000 })
    expect(tree.exit).toEqual({ code: 0, signal: null })
    expect(await processAlive(escaped)).toBe(false)
  })

  it('members that die unreaped count as gone: zombies left to an init that never collects them do not hold the reaping', async () => {
    // The exec'd sleep never waits for its children, so the killed grandchild stays a
    // zombie, then is orphaned to PID 1 (which, in many containers, never reaps it).
    const tree = sh('sleep 30 & echo $!; exec sleep 30')
    const grandchild = Number(await firstLine(tree))
    // A grace past the test's timeout: the reaping ends in time only if the zombie does not hold it.
    await tree.reap({ stdinGraceMs: 50, termGraceMs: 60_000 })
    expect(tree.exit).toEqual({ code: null, signal: 'SIGTERM' })
    expect(await processAlive(grandchild)).toBe(false)
  })
})
