import { afterEach, describe, expect, it } from 'vitest'
import type { Fiber } from 'cordis'
import { createHarness, type Harness } from '@dsh/testkit/harness'
import type { Agent } from '@dsh/agent'
import { TaskService, type TaskOutcome, type TaskRegistration } from '@dsh/tasks'

let harness: Harness
let fiber: Fiber
afterEach(async () => {
  await harness?.dispose()
})

async function setup(config: Partial<TaskService.Config> = {}, options: { surface?: boolean } = {}) {
  harness = await createHarness()
  fiber = await harness.ctx.plugin(TaskService, config as TaskService.Config)
  if (options.surface !== false) harness.ctx.tasks.attachSurface('test')
  return harness.ctx.tasks
}

/** A producer the test drives: `finish` settles its work; `cancel` stops it after `stopMs`. */
function job(options: { owner?: string; kind?: string; stopMs?: number; stream?: string[] } = {}) {
  let finish!: (outcome: TaskOutcome) => void
  let fail!: (error: Error) => void
  const done = new Promise<TaskOutcome>((resolve, reject) => {
    finish = resolve
    fail = reject
  })
  const cancels: string[] = []
  let stopped = false
  const markStopped = () => {
    stopped = true
  }
  void done.then(markStopped, markStopped)
  const registration: TaskRegistration = {
    kind: options.kind ?? 'job',
    label: 'a test job',
    owner: options.owner,
    cancel: (reason) => {
      cancels.push(reason)
      setTimeout(() => finish({ status: 'killed', output: 'partial' }), options.stopMs ?? 5)
    },
    done,
  }
  if (options.stream) {
    const chunks = options.stream
    registration.readOutput = (cursor) => {
      const all = chunks.join('')
      return { text: all.slice(cursor), next: all.length, skipped: 0 }
    }
  }
  return { registration, finish, fail, cancels, isStopped: () => stopped }
}

describe('registration', () => {
  it('numbers ids per kind from 1, and a refused registration consumes no id', async () => {
    const tasks = await setup({ maxLiveTasksPerOwner: 2 })
    const owner = await harness.agent()
    expect(tasks.register(job({ owner: owner.id, kind: 'bash' }).registration)).toBe('bash-1')
    expect(tasks.register(job({ owner: owner.id, kind: 'subagent' }).registration)).toBe('subagent-1')
    expect(() => tasks.register(job({ owner: owner.id, kind: 'bash' }).registration)).toThrow(expect.objectContaining({ code: 'LIMIT' }))
    expect(() => tasks.register(job({ kind: 'Bad Kind' }).registration)).toThrow(expect.objectContaining({ code: 'INVALID_TASK' }))
    expect(() => tasks.register(job({ owner: 'no-such-agent', kind: 'bash' }).registration)).toThrow(expect.objectContaining({ code: 'OWNER_GONE' }))
    expect(tasks.register(job({ kind: 'bash' }).registration)).toBe('bash-2')
    expect(tasks.register(job({ kind: 'subagent' }).registration)).toBe('subagent-2')
  })

  it('a queued task is live and shown queued, but does not count against maxLiveTasksPerOwner until it starts', async () => {
    const tasks = await setup({ maxLiveTasksPerOwner: 1 })
    const owner = await harness.agent()
    let waiting = true
    const queued = job({ owner: owner.id, kind: 'subagent' })
    const id = tasks.register({ ...queued.registration, queued: () => waiting })
    expect(tasks.get(id, owner.id)).toMatchObject({ status: 'running', queued: true })
    expect(tasks.hasLive(owner.id)).toBe(true)
    // The slot the queued task does not take is free for another.
    const other = tasks.register(job({ owner: owner.id, kind: 'bash' }).registration)
    expect(other).toBe('bash-1')
    waiting = false
    expect(tasks.get(id, owner.id).queued).toBeUndefined()
    expect(() => tasks.register(job({ owner: owner.id, kind: 'bash' }).registration)).toThrow(expect.objectContaining({ code: 'LIMIT' }))
  })

  it('refuses every registration while no surface is attached, naming the package to load', async () => {
    const tasks = await setup({}, { surface: false })
    expect(() => tasks.register(job().registration)).toThrow(expect.objectContaining({ code: 'NO_SURFACE', message: expect.stringContaining('@dsh/tool-tasks') }))
    const detach = tasks.attachSurface('late')
    expect(tasks.register(job().registration)).toBe('job-1')
    detach()
    expect(() => tasks.assertAdmission({ kind: 'job' })).toThrow(expect.objectContaining({ code: 'NO_SURFACE' }))
  })

  it('the admission bound rejects the 11th live task of an owner and says how to free a slot', async () => {
    const tasks = await setup()
    const owner = await harness.agent()
    const jobs = Array.from({ length: 10 }, () => job({ owner: owner.id }))
    for (const each of jobs) tasks.register(each.registration)
    let refusal: unknown
    try {
      tasks.register(job({ owner: owner.id }).registration)
    } catch (error) {
      refusal = error
    }
    expect(refusal).toMatchObject({ code: 'LIMIT', message: expect.stringMatching(/10 live background tasks.*maxLiveTasksPerOwner 10.*task_output with wait: true.*task_kill/) })
    // Another owner and unowned work have their own budgets.
    const other = await harness.agent()
    expect(tasks.register(job({ owner: other.id }).registration)).toBe('job-11')
    // A settled task frees its slot.
    jobs[0].finish({ status: 'completed' })
    await tasks.wait('job-1', owner.id, 1000)
    expect(tasks.register(job({ owner: owner.id }).registration)).toBe('job-12')
  })
})

describe('reservations', () => {
  it('a reserved slot counts against the limit until it is bound or released, and is used once', async () => {
    const tasks = await setup({ maxLiveTasksPerOwner: 1 })
    const owner = await harness.agent()
    const slot = tasks.reserve({ kind: 'job', owner: owner.id })
    expect(() => tasks.reserve({ kind: 'job', owner: owner.id })).toThrow(expect.objectContaining({ code: 'LIMIT' }))
    expect(() => tasks.register(job({ owner: owner.id }).registration)).toThrow(expect.objectContaining({ code: 'LIMIT' }))
    slot.release()
    slot.release()
    expect(() => slot.register(job().registration)).toThrow(expect.objectContaining({ code: 'INVALID_TASK' }))
    const next = tasks.reserve({ kind: 'job', owner: owner.id })
    const work = job()
    const id = next.register({ label: 'bound', cancel: work.registration.cancel, done: work.registration.done })
    expect(tasks.get(id, owner.id)).toMatchObject({ kind: 'job', owner: owner.id, label: 'bound', status: 'running' })
    expect(() => tasks.reserve({ kind: 'job', owner: owner.id })).toThrow(expect.objectContaining({ code: 'LIMIT' }))
  })

  it('binding a slot whose owner was disposed meanwhile is refused and gives the slot back', async () => {
    const tasks = await setup()
    const owner = await harness.agent()
    const slot = tasks.reserve({ kind: 'job', owner: owner.id })
    await owner.dispose()
    expect(() => slot.register(job().registration)).toThrow(expect.objectContaining({ code: 'OWNER_GONE' }))
  })
})

describe('the owner fence', () => {
  it('holds for get, read, wait, kill and list; unowned tasks are anyone\'s', async () => {
    const tasks = await setup()
    const owner = await harness.agent()
    const other = await harness.agent()
    const mine = job({ owner: owner.id })
    const id = tasks.register(mine.registration)
    const shared = tasks.register(job().registration)
    const fenced = expect.objectContaining({ code: 'NOT_OWNER', message: expect.stringContaining('belongs to another session') })
    expect(() => tasks.get(id, other.id)).toThrow(fenced)
    expect(() => tasks.read(id, other.id)).toThrow(fenced)
    await expect(tasks.wait(id, other.id, 10)).rejects.toThrow(fenced)
    await expect(tasks.kill(id, other.id)).rejects.toThrow(fenced)
    expect(mine.cancels).toEqual([])
    expect(tasks.list(other.id).map((task) => task.id)).toEqual([shared])
    expect(tasks.list(owner.id).map((task) => task.id)).toEqual([id, shared])
    expect(tasks.get(shared, other.id).status).toBe('running')
    expect(() => tasks.read('job-99', owner.id)).toThrow(expect.objectContaining({ code: 'UNKNOWN_TASK', message: expect.stringContaining(`yours: ${id}, ${shared}`) }))
  })
})

describe('settlement', () => {
  it('is first-wins: a kill before done settles makes it killed with the kill reason, and kill resolves once the work stopped', async () => {
    const tasks = await setup()
    const owner = await harness.agent()
    const work = job({ owner: owner.id, stopMs: 30 })
    const id = tasks.register(work.registration)
    const killed = await tasks.kill(id, owner.id, 'no longer needed')
    expect(work.isStopped()).toBe(true)
    expect(work.cancels).toEqual(['no longer needed'])
    expect(killed).toMatchObject({ status: 'killed', detail: 'no longer needed', reported: true })
    expect(tasks.read(id, owner.id).text).toBe('partial')
    // A second kill changes nothing and does not reach the producer again.
    expect((await tasks.kill(id, owner.id, 'again')).detail).toBe('no longer needed')
    expect(work.cancels).toHaveLength(1)
  })

  it('a kill after done settled changes nothing', async () => {
    const tasks = await setup()
    const owner = await harness.agent()
    const work = job({ owner: owner.id })
    const id = tasks.register(work.registration)
    work.finish({ status: 'completed', output: 'answer' })
    await tasks.wait(id, owner.id, 1000)
    expect(await tasks.kill(id, owner.id)).toMatchObject({ status: 'completed' })
    expect(work.cancels).toEqual([])
  })

  it('a rejected done settles failed with the error', async () => {
    const tasks = await setup()
    const work = job()
    const id = tasks.register(work.registration)
    work.fail(new Error('the disk is gone'))
    const read = await tasks.wait(id, 'anyone', 1000)
    expect(read.task).toMatchObject({ status: 'failed', detail: expect.stringContaining('the disk is gone') })
  })

  it('final-output tasks show their answer once settled; stream tasks read incrementally through a cursor', async () => {
    const tasks = await setup()
    const final = job()
    const finalId = tasks.register(final.registration)
    expect(tasks.read(finalId, 'x')).toMatchObject({ text: '', task: { status: 'running', outputMode: 'final' } })
    final.finish({ status: 'completed', output: 'the answer', detail: 'done' })
    expect((await tasks.wait(finalId, 'x', 1000)).text).toBe('the answer')
    expect(tasks.read(finalId, 'x').text).toBe('the answer')

    const chunks = ['one\n']
    const stream = job({ stream: chunks })
    const streamId = tasks.register(stream.registration)
    expect(tasks.read(streamId, 'x')).toMatchObject({ text: 'one\n', task: { outputMode: 'stream', status: 'running' } })
    expect(tasks.read(streamId, 'x').text).toBe('')
    chunks.push('two\n')
    stream.finish({ status: 'completed' })
    expect((await tasks.wait(streamId, 'x', 1000)).text).toBe('two\n')
    expect(tasks.read(streamId, 'x').text).toBe('')
  })

  it('wait returns running on timeout, and a wait that sees the settlement marks it reported', async () => {
    const tasks = await setup()
    const owner = await harness.agent()
    const work = job({ owner: owner.id })
    const id = tasks.register(work.registration)
    const timedOut = await tasks.wait(id, owner.id, 20)
    expect(timedOut.task).toMatchObject({ status: 'running', reported: false })
    const seen: boolean[] = []
    harness.ctx.tasks.onSettled((task) => seen.push(task.reported))
    const waiting = tasks.wait(id, owner.id, 5_000)
    work.finish({ status: 'completed', output: 'x' })
    expect((await waiting).task).toMatchObject({ status: 'completed', reported: true })
    // The settlement listener already saw it as reported: no notice would follow.
    expect(seen).toEqual([true])
  })

  it('an async settlement listener that rejects is contained: no unhandled rejection, and later listeners still hear', async () => {
    const tasks = await setup()
    const unhandled: unknown[] = []
    const onUnhandled = (reason: unknown) => unhandled.push(reason)
    process.on('unhandledRejection', onUnhandled)
    try {
      tasks.onSettled(async () => {
        throw new Error('listener failed')
      })
      const heard: string[] = []
      tasks.onSettled((task) => heard.push(task.id))
      const work = job()
      const id = tasks.register(work.registration)
      work.finish({ status: 'completed' })
      await tasks.wait(id, 'anyone', 5_000)
      await new Promise((resolve) => setImmediate(resolve))
      expect(heard).toEqual([id])
      expect(unhandled).toEqual([])
    } finally {
      process.off('unhandledRejection', onUnhandled)
    }
  })

  it('a kill whose caller\'s signal aborts stops waiting for a producer that never stops, and the kill stands', async () => {
    const tasks = await setup()
    const stuck = job({ stopMs: 60_000 })
    const id = tasks.register(stuck.registration)
    const controller = new AbortController()
    const killing = tasks.kill(id, 'x', 'enough', controller.signal)
    setTimeout(() => controller.abort(), 20)
    await expect(killing).rejects.toMatchObject({ code: 'ABORTED' })
    expect(stuck.cancels).toEqual(['enough'])
    expect(tasks.get(id, 'x').status).toBe('running')
    stuck.finish({ status: 'killed' })
  })

  it('a wait whose signal aborts rejects with ABORTED', async () => {
    const tasks = await setup()
    const id = tasks.register(job().registration)
    const controller = new AbortController()
    const waiting = tasks.wait(id, 'x', 5_000, controller.signal)
    controller.abort()
    await expect(waiting).rejects.toMatchObject({ code: 'ABORTED' })
  })

  it('reading a running task leaves it unreported; reading it settled marks it reported', async () => {
    const tasks = await setup()
    const work = job()
    const id = tasks.register(work.registration)
    expect(tasks.read(id, 'x').task.reported).toBe(false)
    work.finish({ status: 'completed' })
    await new Promise((resolve) => setTimeout(resolve, 5))
    expect(tasks.get(id, 'x').reported).toBe(false)
    expect(tasks.takeUnreported(id)).toMatchObject({ id, reported: true })
    expect(tasks.takeUnreported(id)).toBeUndefined()
  })
})

describe('owners and lifetimes', () => {
  it('hasLive and whenSettled follow an owner\'s live work', async () => {
    const tasks = await setup()
    const owner = await harness.agent()
    expect(tasks.hasLive(owner.id)).toBe(false)
    await tasks.whenSettled(owner.id)
    const work = job({ owner: owner.id })
    tasks.register(work.registration)
    expect(tasks.hasLive(owner.id)).toBe(true)
    let settled = false
    const next = tasks.whenSettled(owner.id).then(() => (settled = true))
    await new Promise((resolve) => setTimeout(resolve, 10))
    expect(settled).toBe(false)
    work.finish({ status: 'completed' })
    await next
    expect(tasks.hasLive(owner.id)).toBe(false)
  })

  it('disposing the owner cancels its live tasks, resolves only once they stopped, and forgets them', async () => {
    const tasks = await setup()
    const owner: Agent = await harness.agent()
    const slow = job({ owner: owner.id, stopMs: 80 })
    const quick = job({ owner: owner.id, stopMs: 1 })
    const finished = job({ owner: owner.id })
    const unrelated = job()
    tasks.register(slow.registration)
    tasks.register(quick.registration)
    const finishedId = tasks.register(finished.registration)
    tasks.register(unrelated.registration)
    finished.finish({ status: 'completed' })
    await tasks.wait(finishedId, owner.id, 1000)
    const notices: string[] = []
    tasks.onSettled((task) => notices.push(`${task.id}:${task.status}:${task.reported}`))
    await owner.dispose()
    expect(slow.isStopped() && quick.isStopped()).toBe(true)
    expect(slow.cancels).toEqual([`its owner ${owner.id} was disposed`])
    expect(finished.cancels).toEqual([])
    expect(unrelated.cancels).toEqual([])
    expect(notices.sort()).toEqual(['job-1:killed:true', 'job-2:killed:true'])
    expect(tasks.list(owner.id).map((task) => task.id)).toEqual(['job-4'])
    expect(() => tasks.register(job({ owner: owner.id }).registration)).toThrow(expect.objectContaining({ code: 'OWNER_GONE' }))
  })

  it('unloading the registry stops every live task and waits for it', async () => {
    const tasks = await setup()
    const work = job({ stopMs: 40 })
    tasks.register(work.registration)
    await fiber.dispose()
    expect(work.cancels).toEqual(['the tasks runtime was unloaded'])
    expect(work.isStopped()).toBe(true)
  })
})
