/**
 * Signed jobs against a real Redis (`@dsh/testkit/redis`): a worker that holds the queue
 * key runs what a parent with the same key delegates, and refuses, before anything runs,
 * a job from a parent without the key, one signed with another key, and a signed job a
 * Redis writer changed (its rules or budget) or copied to another id. The parent reads
 * why as its run's diagnostic.
 */
import { mkdtempSync, rmSync } from 'node:fs'
import { tmpdir } from 'node:os'
import { join } from 'node:path'
import { afterAll, beforeAll, describe, expect, it } from 'vitest'
import { Job, Queue, QueueEvents } from 'bullmq'
import { text } from '@dsh/llm'
import { jobPayload, jobSignature, JOB_NAME, QueuePlugin, readQueueKey } from '@dsh/subagent-queue'
import { createDelegationHarness, type DelegationHarness } from '@dsh/testkit/delegation'
import { startRedis, type RedisServer } from '@dsh/testkit/redis'
import { serveQueue, WORKER_NAME, type QueueWorker } from '@dsh/queue-worker'

const QUEUE = 'signed'
const KEY = 'the queue key of this test, long enough'
let redis: RedisServer
let scratch: string
let worker: DelegationHarness
let served: QueueWorker
let signingParent: DelegationHarness
let unsignedParent: DelegationHarness
let queue: Queue
let events: QueueEvents

beforeAll(async () => {
  redis = await startRedis()
  process.env.DSH_TEST_SIGNED_QUEUE_URL = redis.url
  process.env.DSH_TEST_QUEUE_KEY = KEY
  scratch = mkdtempSync(join(tmpdir(), 'dsh-queue-signed-'))
  worker = await createDelegationHarness({ script: [{ reply: [{ text: 'the worker ran it' }] }] })
  served = await serveQueue(worker.ctx, { queues: [QUEUE], redisUrl: redis.url, concurrency: 2, maxDepth: 3, cwd: scratch, lockMs: 2_000, key: readQueueKey('DSH_TEST_QUEUE_KEY') })
  const provider = { queue: QUEUE, redisUrlEnv: 'DSH_TEST_SIGNED_QUEUE_URL' }
  signingParent = await createDelegationHarness({ script: [{ reply: [{ text: 'unused' }] }], sessionDir: false, plugins: [[QueuePlugin, { ...provider, keyEnv: 'DSH_TEST_QUEUE_KEY' }]] })
  unsignedParent = await createDelegationHarness({ script: [{ reply: [{ text: 'unused' }] }], sessionDir: false, plugins: [[QueuePlugin, provider]] })
  queue = new Queue(QUEUE, { connection: { path: redis.socket } })
  events = new QueueEvents(QUEUE, { connection: { path: redis.socket } })
  await events.waitUntilReady()
})

afterAll(async () => {
  await events?.close()
  await queue?.close()
  await signingParent?.dispose()
  await unsignedParent?.dispose()
  await served?.close({ cancel: true })
  await worker?.dispose()
  await redis?.stop()
  delete process.env.DSH_TEST_QUEUE_KEY
  rmSync(scratch, { recursive: true, force: true })
})

async function delegate(parent: DelegationHarness, prompt: string) {
  const from = await parent.agent()
  const run = await parent.ctx.subagents.start('queue', { prompt: [text(prompt)], parent: from, signal: new AbortController().signal })
  const result = await run.result
  await run.dispose()
  const job = await Job.fromId(queue, run.id.replace(/^queue:/, ''))
  return { result, job: job! }
}

/** Adds `data` as job `id` the way a Redis writer would, and resolves with why it failed (or rejects if it ran). */
async function failureOf(id: string, data: Record<string, unknown>): Promise<string> {
  const job = await queue.add(JOB_NAME, data, { jobId: id, attempts: 3 })
  try {
    await job.waitUntilFinished(events)
  } catch (error) {
    const failed = await Job.fromId(queue, id)
    expect(failed!.attemptsMade).toBe(1)
    return (error as Error).message
  }
  throw new Error(`job ${id} ran`)
}

/** A job's data signed with `key` for `id`, as a parent with that key writes it. */
function signedData(id: string, key = readQueueKey('DSH_TEST_QUEUE_KEY')): Record<string, unknown> & { lineage: Record<string, unknown> } {
  const data = JSON.parse(JSON.stringify(jobPayload('forged work', { parentSession: 'p1', delegationDepth: 1, provider: 'queue', permissions: [{ from: 'config', deny: ['bash'] }], budget: { outputTokens: 100 } }))) as Record<string, unknown> & { lineage: Record<string, unknown> }
  data.sig = jobSignature(key, QUEUE, id, data)
  return data
}

describe('a worker with a queue key', () => {
  it('runs a job its parent signed with the same key', async () => {
    const { result, job } = await delegate(signingParent, 'signed work')
    expect(result.stopReason, result.diagnostic).toBe('completed')
    expect(result.output).toEqual([text('the worker ran it')])
    expect(job.data.sig).toMatch(/^hmac-sha256:[0-9a-f]{64}$/)
    expect(JSON.stringify(job.data)).not.toContain(KEY)
  })

  it('refuses an unsigned job, one signed with another key, and a signed one changed or copied after signing: nothing runs, the parent reads why, and the worker goes on serving', async () => {
    const requestsBefore = worker.requests.length
    const sessionsBefore = (await worker.ctx.sessions.listStored()).length

    const unsigned = await delegate(unsignedParent, 'unsigned work')
    expect(unsigned.result.stopReason).toBe('error')
    expect(unsigned.result.diagnostic).toContain(`[${WORKER_NAME}] the job is not signed, and this worker runs only jobs signed with the queue key in DSH_TEST_QUEUE_KEY: give the parent's queue provider the same key (keyEnv: DSH_TEST_QUEUE_KEY); nothing ran`)
    expect(unsigned.job.attemptsMade).toBe(1)

    const otherKey = readQueueKey('OTHER', { OTHER: 'a different key, also long enough to use' })
    expect(await failureOf('forged-other-key', signedData('forged-other-key', otherKey))).toMatch(/the job's signature does not match its contents/)
    const budgetRaised = signedData('forged-budget')
    budgetRaised.lineage.budget = { outputTokens: 1_000_000 }
    expect(await failureOf('forged-budget', budgetRaised)).toMatch(/the job's signature does not match its contents/)
    const rulesDropped = signedData('forged-rules')
    delete rulesDropped.lineage.permissions
    expect(await failureOf('forged-rules', rulesDropped)).toMatch(/the job's signature does not match its contents/)
    // A signed job copied under another id (to run it again) is refused too.
    expect(await failureOf('copied', signedData('original'))).toMatch(/the job's signature does not match its contents/)

    expect(worker.requests.length).toBe(requestsBefore)
    expect((await worker.ctx.sessions.listStored()).length).toBe(sessionsBefore)
    const after = await delegate(signingParent, 'still serving?')
    expect(after.result.output).toEqual([text('the worker ran it')])
  })
})
