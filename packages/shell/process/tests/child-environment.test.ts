import { describe, expect, it } from 'vitest'
import { childEnvironment, isCredentialName } from '@dsh/process'

describe('the child environment', () => {
  it('credential-shaped names are KEY, TOKEN, SECRET or PASSWORD anywhere, in any case', () => {
    for (const name of ['DEEPSEEK_API_KEY', 'GH_TOKEN', 'aws_secret_access_key', 'DbPassword', 'SSH_AUTH_SOCK_KEY']) expect(isCredentialName(name)).toBe(true)
    for (const name of ['PATH', 'HOME', 'DSH_HOME', 'LANG', 'NODE_OPTIONS']) expect(isCredentialName(name)).toBe(false)
  })

  it('is the parent minus credentials plus the configured env, which may re-add one on purpose', () => {
    const env = childEnvironment({ PATH: '/bin', OPENAI_API_KEY: 'sk-1', MY_TOKEN: 't', LANG: 'C' }, { env: { OPENAI_API_KEY: 'for-the-child', EXTRA: '1' } })
    expect(env).toEqual({ PATH: '/bin', LANG: 'C', OPENAI_API_KEY: 'for-the-child', EXTRA: '1' })
  })

  it('drops every credential-shaped name (KEY, TOKEN, SECRET, PASSWORD) and adds the configured env', () => {
    const env = childEnvironment({ PATH: '/bin', OPENAI_API_KEY: 'k', GH_TOKEN: 't', CLIENT_SECRET: 's', DB_PASSWORD: 'p', HOME: '/h' }, { env: { CODEX_HOME: '/c', OPENAI_API_KEY: 'given' } })
    expect(env).toEqual({ PATH: '/bin', HOME: '/h', CODEX_HOME: '/c', OPENAI_API_KEY: 'given' })
  })

  it('passEnv lets named credential-shaped variables through, by exact name, and unset variables are left out', () => {
    const env = childEnvironment({ OPENAI_API_KEY: 'k', OPENAI_API_KEY_2: 'k2', PATH: '/bin', UNSET: undefined }, { passEnv: ['OPENAI_API_KEY'] })
    expect(env).toEqual({ OPENAI_API_KEY: 'k', PATH: '/bin' })
  })
})
