import { describe, expect, it } from 'vitest'
import { SubagentError } from '@dsh/subagent'
import { A2aProviderConfig, resolveA2aSpec } from '@dsh/subagent-a2a'

describe('a2a provider config', () => {
  it('defaults providerName to a2a and reads the token from tokenEnv, keeping it out of the config', () => {
    const config = A2aProviderConfig({ urls: ['http://127.0.0.1:7700/'], tokenEnv: 'A2A_T' })
    expect(resolveA2aSpec(config, { A2A_T: 'secret' })).toEqual({ provider: 'a2a', urls: ['http://127.0.0.1:7700'], token: 'secret', tokenEnv: 'A2A_T', timeoutMs: undefined })
  })

  it('a tokenEnv that is unset or empty fails the load naming the variable', () => {
    const config = A2aProviderConfig({ urls: ['http://127.0.0.1:7700'], tokenEnv: 'A2A_T' })
    expect(() => resolveA2aSpec(config, {})).toThrow(SubagentError)
    expect(() => resolveA2aSpec(config, { A2A_T: '' })).toThrow(/A2A_T, which is not set/)
  })

  it('rejects no urls, a URL that is not http(s), a worker listed twice and a bad timeout', () => {
    expect(() => A2aProviderConfig({ urls: [] })).toThrow()
    expect(() => A2aProviderConfig({})).toThrow()
    expect(() => A2aProviderConfig({ urls: ['ftp://host'] })).toThrow()
    expect(() => A2aProviderConfig({ urls: ['http://a:1'], timeoutMs: 0 })).toThrow()
    expect(() => resolveA2aSpec(A2aProviderConfig({ urls: ['http://a:1', 'http://a:1/'] }), {})).toThrow(/lists http:\/\/a:1 twice/)
  })
})
