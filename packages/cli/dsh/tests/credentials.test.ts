/**
 * Through the built CLI, with the DeepSeek and OpenAI keys exported as a user would have
 * them: an endpoint of another host gets exactly the key it was configured with, or none.
 */
import { writeFileSync } from 'node:fs'
import { join } from 'node:path'
import { startFakeOpenAIChat } from '@dsh/testkit'
import { describe, expect, it } from 'vitest'
import { runDsh, tempDir } from './cli.js'

const SECRETS = { DEEPSEEK_API_KEY: 'sk-deepseek-secret', OPENAI_API_KEY: 'sk-openai-secret' }

function configFor(url: string, extra: string): string {
  const file = join(tempDir(), 'dsh.yml')
  writeFileSync(file, `- id: llm-local\n  name: "@dsh/llm-openai"\n  config: { name: local, baseURL: "${url}", model: qwen${extra} }\n`)
  return file
}

describe('a custom endpoint and the keys of others', () => {
  it('a local endpoint without apiKeyEnv is refused before any request, in one line naming the fix, with the DeepSeek key set', async () => {
    const server = await startFakeOpenAIChat([{ text: 'should not be asked' }])
    try {
      const config = configFor(server.url, '')
      for (const args of [['config', 'check', '--config', config], ['run', '--config', config, '--model', 'local:qwen', 'hi']]) {
        const result = await runDsh(args, { env: SECRETS })
        expect(result.code, result.stderr).toBe(2)
        const lines = result.stderr.trim().split('\n')
        expect(lines, result.stderr).toHaveLength(1)
        expect(lines[0]).toContain(`baseURL ${server.url} is not DeepSeek's, so the DeepSeek key is not sent there: set apiKeyEnv`)
      }
      expect(server.requests).toHaveLength(0)
    } finally {
      await server.close()
    }
  })

  it('apiKeyEnv: none runs against the endpoint with no Authorization header and neither key anywhere in the request', async () => {
    const server = await startFakeOpenAIChat([{ text: 'hello without a key' }])
    try {
      const result = await runDsh(['run', '--quiet', '--config', configFor(server.url, ', apiKeyEnv: none'), '--model', 'local:qwen', 'hi'], { env: SECRETS })
      expect(result.code, result.stderr).toBe(0)
      expect(result.stdout).toContain('hello without a key')
      expect(server.requests).toHaveLength(1)
      expect(server.requests[0]!.headers.authorization).toBeUndefined()
      const wire = JSON.stringify(server.requests[0])
      for (const secret of Object.values(SECRETS)) expect(wire).not.toContain(secret)
    } finally {
      await server.close()
    }
  })

  it('a named apiKeyEnv sends exactly that variable', async () => {
    const server = await startFakeOpenAIChat([{ text: 'hello with my key' }])
    try {
      const result = await runDsh(['run', '--quiet', '--config', configFor(server.url, ', apiKeyEnv: LOCAL_LLM_KEY'), '--model', 'local:qwen', 'hi'], { env: { ...SECRETS, LOCAL_LLM_KEY: 'sk-local' } })
      expect(result.code, result.stderr).toBe(0)
      expect(server.requests[0]!.headers.authorization).toBe('Bearer sk-local')
    } finally {
      await server.close()
    }
  })
})
