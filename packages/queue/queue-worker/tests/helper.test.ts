/**
 * A helper's definition through the queue, in one process and against a real Redis
 * (`@dsh/testkit/redis`): a parent harness with the `queue` provider, and a worker harness
 * behind the real `serveQueue`, each with its own services. What the worker's child was
 * given is read from the model requests the worker's scripted adapter received.
 */
import { mkdtempSync, rmSync, writeFileSync } from 'node:fs'
import { tmpdir } from 'node:os'
import { join } from 'node:path'
import { afterAll, beforeAll, describe, expect, it } from 'vitest'
import { Job, Queue } from 'bullmq'
import { text } from '@dsh/llm'
import type { SubagentRequest } from '@dsh/subagent'
import { QueuePlugin } from '@dsh/subagent-queue'
import { createDelegationHarness, type DelegationHarness } from '@dsh/testkit/delegation'
import { startRedis, type RedisServer } from '@dsh/testkit/redis'
import { serveQueue, WORKER_NAME, type QueueWorker } from '@dsh/queue-worker'

const QUEUE = 'helpers'
let redis: RedisServer
let scratch: string
let helperModel: string
let worker: DelegationHarness
let served: QueueWorker
let parent: DelegationHarness
let queue: Queue

beforeAll(async () => {
  redis = await startRedis()
  process.env.DSH_TEST_QUEUE_URL = redis.url
  scratch = mkdtempSync(join(tmpdir(), 'dsh-queue-helper-'))
  // The helper's model: a script of its own, which the worker's default model is not.
  helperModel = join(scratch, 'helper.yml')
  writeFileSync(helperModel, '- reply: [{ text: "the helper\'s model answered" }]\n')
  worker = await createDelegationHarness({ script: [{ reply: [{ text: "the worker's own model answered" }] }], persona: 'You are the worker persona.' })
  for (const name of ['read', 'grep', 'bash']) worker.ctx.tools.register({ name, description: `the ${name} tool`, parameters: { type: 'object' }, execute: () => name })
  served = await serveQueue(worker.ctx, { queues: [QUEUE], redisUrl: redis.url, concurrency: 2, maxDepth: 3, cwd: scratch, lockMs: 2_000 })
  parent = await createDelegationHarness({ script: [{ reply: [{ text: 'unused' }] }], sessionDir: false, plugins: [[QueuePlugin, { queue: QUEUE, redisUrlEnv: 'DSH_TEST_QUEUE_URL' }]] })
  queue = new Queue(QUEUE, { connection: { path: redis.socket } })
})

afterAll(async () => {
  await queue?.close()
  await parent?.dispose()
  await served?.close({ cancel: true })
  await worker?.dispose()
  await redis?.stop()
  rmSync(scratch, { recursive: true, force: true })
})

/** One delegation through the queue, to its end; the run and its job's data. */
async function delegate(prompt: string, more: Partial<SubagentRequest> = {}) {
  const from = await parent.agent()
  const run = await parent.ctx.subagents.start('queue', { prompt: [text(prompt)], parent: from, signal: new AbortController().signal, ...more })
  const result = await run.result
  await run.dispose()
  const job = await Job.fromId(queue, run.id.replace(/^queue:/, ''))
  return { result, job: job! }
}

/** The worker's model requests for the session whose prompt was `prompt`. */
function requestsFor(prompt: string) {
  return worker.requests.filter((request) => JSON.stringify(request.messages.at(0)?.content).includes(prompt))
}

describe("a helper's definition travels with its queue job", () => {
  it('the child runs with the helper\'s persona, tools and model, and its session header names the helper', async () => {
    const { result, job } = await delegate('review the change', {
      helper: { name: 'reviewer', hash: '0123abcd0123abcd' },
      persona: 'You are the reviewer persona.',
      toolFilter: { allow: ['read', 'grep'], deny: ['grep'] },
      agentOptions: { model: `scripted:${helperModel}` },
    })
    expect(result.stopReason, result.diagnostic).toBe('completed')
    expect(result.output).toEqual([text("the helper's model answered")])
    expect(job.data.v).toBe(2)
    const [request] = requestsFor('review the change')
    expect(request!.model).toBe(helperModel)
    expect(request!.system.startsWith('You are the reviewer persona.')).toBe(true)
    expect(request!.system).not.toContain('worker persona')
    expect(request!.tools.map((tool) => tool.name)).toEqual(['read'])
    const stored = await worker.ctx.sessions.readStored(request!.origin.sessionId)
    expect(stored!.header).toMatchObject({ origin: 'queue', helper: { name: 'reviewer', hash: '0123abcd0123abcd' }, attempt: 1 })
  })

  it("a delegation that says nothing of its child runs on the worker's own persona, tools and model, in a job of version 1", async () => {
    const { result, job } = await delegate('answer plainly')
    expect(result.output).toEqual([text("the worker's own model answered")])
    expect(job.data.v).toBe(1)
    expect(job.data).not.toHaveProperty('helper')
    const [request] = requestsFor('answer plainly')
    expect(request!.model).toBe('test')
    expect(request!.system.startsWith('You are the worker persona.')).toBe(true)
    expect(request!.tools.map((tool) => tool.name).sort()).toEqual(['bash', 'grep', 'read'])
  })

  it('a model the worker cannot resolve, or a tool it does not have, fails the job at once naming it and this worker; nothing runs and the worker goes on serving', async () => {
    const before = worker.requests.length
    const sessionsBefore = (await worker.ctx.sessions.listStored()).length
    const unknownAdapter = await delegate('use another model', { helper: { name: 'far', hash: 'ab' }, agentOptions: { model: 'nosuch:big-model' } })
    expect(unknownAdapter.result.stopReason).toBe('error')
    expect(unknownAdapter.result.diagnostic).toContain(`[${WORKER_NAME}] helper "far" asks for model "nosuch:big-model", which this worker cannot run: model spec "nosuch:big-model" names adapter "nosuch", which is not loaded`)
    const missingScript = await delegate('use a missing script', { agentOptions: { model: `scripted:${join(scratch, 'absent.yml')}` } })
    expect(missingScript.result.diagnostic).toMatch(/the job's helper asks for model "scripted:\S+absent\.yml", which this worker cannot run: .*cannot read script file/)
    const missingTool = await delegate('use a tool', { helper: { name: 'searcher', hash: 'cd' }, toolFilter: { allow: ['read', 'web_search'], deny: ['fetch'] } })
    expect(missingTool.result.diagnostic).toContain('helper "searcher" names tools "web_search", "fetch", which this worker does not have (its tools: read, grep, bash)')
    // Refused, not retried: one attempt each, no model request, no session.
    for (const { job } of [unknownAdapter, missingScript, missingTool]) expect(job.attemptsMade).toBe(1)
    expect(worker.requests.length).toBe(before)
    expect((await worker.ctx.sessions.listStored()).length).toBe(sessionsBefore)
    const after = await delegate('still serving?')
    expect(after.result.output).toEqual([text("the worker's own model answered")])
  })
})
