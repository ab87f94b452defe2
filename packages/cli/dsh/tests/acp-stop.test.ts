/**
 * `dsh acp` told to stop (its stdin closing, SIGTERM, SIGINT) takes every process it
 * started down before it exits, even a command that ignores SIGTERM.
 */
import { realpathSync, writeFileSync } from 'node:fs'
import { join } from 'node:path'
import { afterEach, describe, expect, it } from 'vitest'
import { methods, PROTOCOL_VERSION } from '@agentclientprotocol/sdk'
import { killRunning, serveDsh } from './acp-client.js'
import { tempDir } from './cli.js'
import { processesMentioning, until } from './processes.js'

afterEach(killRunning)

const stops = [
  ['its stdin closes', (served: ReturnType<typeof serveDsh>) => served.child.stdin!.end()],
  ['SIGTERM', (served: ReturnType<typeof serveDsh>) => served.child.kill('SIGTERM')],
  ['SIGINT', (served: ReturnType<typeof serveDsh>) => served.child.kill('SIGINT')],
] as const

describe('dsh acp stopping', () => {
  for (const [index, [how, stop]] of stops.entries()) {
    it(`when ${how} during a command that ignores SIGTERM, it exits 0 and leaves no descendant running`, async () => {
      const dir = tempDir()
      const marker = `${880 + index}.${process.pid}`
      const model = join(dir, 'model.yml')
      writeFileSync(model, `- reply:\n    - call: { tool: bash, args: { command: "trap '' TERM; sleep ${marker}; true" } }\n    - text: never\n`)
      const served = serveDsh(['--model', `scripted:${model}`, '--session-dir', dir, '--permission', 'allow'])
      const { agent } = served.connection
      await agent.request(methods.agent.initialize, { protocolVersion: PROTOCOL_VERSION, clientCapabilities: {} })
      const { sessionId } = await agent.request(methods.agent.session.new, { cwd: realpathSync(dir), mcpServers: [] })
      const answer = agent.request(methods.agent.session.prompt, { sessionId, prompt: [{ type: 'text', text: 'run it' }] }).catch(() => 'the connection closed first')
      let exitedEarly = false
      void served.exited.then(() => (exitedEarly = true))
      await until(() => processesMentioning(`sleep ${marker}`).length > 0, () => (exitedEarly ? `dsh acp exited before the command started:\n${served.stderr()}` : undefined))
      stop(served)
      const exit = await served.exited
      expect(exit, served.stderr()).toEqual({ code: 0, signal: null })
      expect(processesMentioning(marker)).toEqual([])
      await answer
    })
  }
})
