/**
 * A Claude model at the root, through the built CLI against testkit's fake Messages server:
 * the answer comes back streamed, a fork child's first request reaches its parent's cache
 * breakpoint with the same prompt, and the key goes only where the config sends it.
 */
import { writeFileSync } from 'node:fs'
import { join } from 'node:path'
import { startFakeAnthropicMessages, type FakeAnthropicMessages } from '@dsh/testkit'
import { afterEach, describe, expect, it } from 'vitest'
import { runDsh, tempDir } from './cli.js'

const ANTHROPIC_SECRET = 'sk-ant-user-secret'
let server: FakeAnthropicMessages | undefined
afterEach(async () => {
  await server?.close()
  server = undefined
})

/** The default `anthropic` adapter pointed at the fake, with its own key variable, and a tool bound to the fork provider. */
function configFor(url: string): string {
  const file = join(tempDir(), 'dsh.yml')
  writeFileSync(
    file,
    [
      '- id: llm-anthropic',
      '  name: "@dsh/llm-anthropic"',
      `  config: { baseURL: "${url}", apiKeyEnv: FAKE_CLAUDE_KEY, maxRetries: 0 }`,
      '- id: tool-subagent-fork',
      '  name: "@dsh/tool-subagent"',
      '  config: { provider: fork, toolName: subagent_fork }',
      '',
    ].join('\n'),
  )
  return file
}

interface Block {
  type: string
  text?: string
  cache_control?: unknown
}
interface Body {
  tools?: Block[]
  system?: Block[]
  messages: { role: string; content: Block[] }[]
}

/** The prompt through message `last`, as the cache compares it (without the breakpoint markers). */
function prefixThrough(body: Body, last: number): string {
  return JSON.stringify({ tools: body.tools, system: body.system, messages: body.messages.slice(0, last + 1) }, (key, value: unknown) => (key === 'cache_control' ? undefined : value))
}

describe('dsh run --model anthropic:<model>', () => {
  it('streams the answer and delegates to a fork child whose request reuses the parent\'s cache breakpoint; only the configured key is sent', async () => {
    server = await startFakeAnthropicMessages([
      { toolUses: [{ id: 'toolu_fork', name: 'subagent_fork', input: { description: 'risks', prompt: 'list the risks of the plan' } }], usage: { inputTokens: 900, outputTokens: 20, cacheCreationInputTokens: 2100 } },
      { text: 'risk: no rollback', usage: { inputTokens: 30, outputTokens: 5, cacheReadInputTokens: 2100 } },
      { text: 'The fork found one risk: no rollback.' },
    ])
    const dir = tempDir()
    const result = await runDsh(['run', '--json', '--config', configFor(server.url), '--model', 'anthropic:claude-x', '--session-dir', dir, 'review the plan'], {
      env: { ANTHROPIC_API_KEY: ANTHROPIC_SECRET, FAKE_CLAUDE_KEY: 'sk-fake-claude' },
    })
    expect(result.code, result.stderr).toBe(0)

    // Streamed: the root's answer reached --json as several text deltas, all before the answer record.
    const records = result.stdout.trim().split('\n').map((line) => JSON.parse(line) as { kind: string; text?: string })
    const deltas = records.filter((record) => record.kind === 'text/delta')
    expect(deltas.length, result.stdout).toBeGreaterThan(1)
    expect(deltas.map((record) => record.text).join('')).toBe('The fork found one risk: no rollback.')
    const answerAt = records.findIndex((record) => record.kind === 'answer')
    expect(records[answerAt]?.text).toBe('The fork found one risk: no rollback.')
    expect(records.findLastIndex((record) => record.kind === 'text/delta')).toBeLessThan(answerAt)

    const [parent, child, parentAgain] = server.messageRequests.map((request) => request.body as Body)
    expect(parent && child && parentAgain, `${server.messageRequests.length} requests`).toBeTruthy()
    // The child is the fork: its history is the parent's request with its own prompt after it.
    expect(JSON.stringify(child!.messages.at(-1))).toContain('list the risks of the plan')
    const parentLast = parent!.messages.length - 1
    const marked = (body: Body) => body.messages[parentLast]!.content.at(-1)!.cache_control
    expect(marked(parent!)).toEqual({ type: 'ephemeral' })
    expect(marked(child!)).toEqual({ type: 'ephemeral' })
    expect(prefixThrough(child!, parentLast)).toBe(prefixThrough(parent!, parentLast))

    // The key: the configured variable's, on every request, and never the user's Anthropic key.
    for (const request of server.requests) expect(request.headers.authorization).toBe('Bearer sk-fake-claude')
    expect(JSON.stringify(server.requests.map((request) => request.headers))).not.toContain(ANTHROPIC_SECRET)
  })

  it('refuses another base URL that names no key variable, in one line, before any request, with ANTHROPIC_API_KEY set', async () => {
    server = await startFakeAnthropicMessages([{ text: 'should not be asked' }])
    const file = join(tempDir(), 'dsh.yml')
    writeFileSync(file, `- id: llm-anthropic\n  name: "@dsh/llm-anthropic"\n  config: { baseURL: "${server.url}" }\n`)
    const result = await runDsh(['run', '--config', file, '--model', 'anthropic:claude-x', 'hi'], { env: { ANTHROPIC_API_KEY: ANTHROPIC_SECRET } })
    expect(result.code).toBe(2)
    const lines = result.stderr.trim().split('\n')
    expect(lines, result.stderr).toHaveLength(1)
    expect(lines[0]).toContain(`baseURL ${server.url} is not Anthropic's (https://api.anthropic.com), so ANTHROPIC_API_KEY is not sent there: set apiKeyEnv`)
    expect(server.requests).toHaveLength(0)
  })
})
