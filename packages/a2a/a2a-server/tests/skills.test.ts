import { mkdirSync, mkdtempSync, rmSync, writeFileSync } from 'node:fs'
import { tmpdir } from 'node:os'
import { join } from 'node:path'
import { afterEach, describe, expect, it } from 'vitest'
import { TaskState } from '@a2a-js/sdk'
import type { Session } from '@dsh/session'
import { serveA2a, type A2aServer } from '@dsh/a2a-server'
import { AgentDefinitionsService } from '@dsh/agent-definitions'
import { SubagentService } from '@dsh/subagent'
import { SpawnPlugin } from '@dsh/subagent-spawn'
import { createHarness, type Harness } from '@dsh/testkit/harness'
import { recordRequests } from '@dsh/testkit/delegation'
import { artifactText, finalState, sdkClient, streamAll, userMessage } from './helpers.js'

let root: string | undefined
let server: A2aServer | undefined
let harness: Harness | undefined
afterEach(async () => {
  await server?.close()
  await harness?.dispose()
  if (root) rmSync(root, { recursive: true, force: true })
  server = harness = root = undefined
})

/** A worker with two helpers defined in files: one it can run as a task (spawn), one it cannot (an unknown provider's). */
async function workerWithHelpers() {
  root = mkdtempSync(join(tmpdir(), 'dsh-a2a-skills-'))
  const dir = join(root, '.dsh', 'agents')
  mkdirSync(dir, { recursive: true })
  writeFileSync(join(dir, 'reviewer.md'), '---\nname: reviewer\ndescription: Reviews a change for bugs.\ntools: [lookup]\n---\nYou are the reviewer persona.\n')
  writeFileSync(join(dir, 'far.md'), '---\nname: far\ndescription: Runs elsewhere.\nprovider: acp\n---\nx\n')
  harness = await createHarness({ script: [{ reply: [{ text: 'reviewed' }] }] })
  harness.ctx.tools.register({ name: 'lookup', description: 'looks things up', parameters: { type: 'object' }, execute: async () => 'x' })
  harness.ctx.tools.register({ name: 'other', description: 'another tool', parameters: { type: 'object' }, execute: async () => 'x' })
  await harness.plugin(SubagentService)
  await harness.plugin(SpawnPlugin, {})
  await harness.plugin(AgentDefinitionsService, { cwd: root, home: join(root, 'home') })
  const sessions: Session[] = []
  harness.ctx.sessions.addObserver({ created: (session) => void sessions.push(session) })
  const requests = recordRequests(harness)
  server = await serveA2a(harness.ctx)
  return { sessions, requests, url: server.url }
}

describe('dsh a2a serve and agent definitions', () => {
  it('advertises each helper it can run as a skill of its card', async () => {
    const { url } = await workerWithHelpers()
    const card = await (await sdkClient(url)).getAgentCard()
    expect(card.skills.map((skill) => [skill.id, skill.description])).toEqual([
      ['dsh-prompt', 'Do the task the text asks for, with the tools this dsh is composed with.'],
      ['reviewer', 'Reviews a change for bugs.'],
    ])
  })

  it('a task naming a skill runs as that helper: its persona, its tools, and its name in the session header', async () => {
    const { url, sessions, requests } = await workerWithHelpers()
    const events = await streamAll(await sdkClient(url), userMessage('check this', { skill: 'reviewer' }))
    expect(finalState(events)).toBe(TaskState.TASK_STATE_COMPLETED)
    expect(artifactText(events, 'answer')).toBe('reviewed')
    expect(requests[0]!.system.startsWith('You are the reviewer persona.')).toBe(true)
    expect(requests[0]!.tools.map((tool) => tool.name)).toEqual(['lookup'])
    expect(sessions[0]!.header.helper).toEqual({ name: 'reviewer', hash: expect.stringMatching(/^[0-9a-f]{16}$/) })
  })

  it('a task without a skill is a plain session, and an unknown skill is rejected before any session exists', async () => {
    const { url, sessions, requests } = await workerWithHelpers()
    const client = await sdkClient(url)
    const rejected = await streamAll(client, userMessage('check this', { skill: 'far' }))
    expect(finalState(rejected)).toBe(TaskState.TASK_STATE_REJECTED)
    expect(sessions).toHaveLength(0)
    const plain = await streamAll(client, userMessage('check this'))
    expect(finalState(plain)).toBe(TaskState.TASK_STATE_COMPLETED)
    expect(sessions[0]!.header.helper).toBeUndefined()
    expect(requests[0]!.system).not.toContain('reviewer persona')
    expect(requests[0]!.tools.map((tool) => tool.name).sort()).toEqual(['lookup', 'other'])
  })
})
