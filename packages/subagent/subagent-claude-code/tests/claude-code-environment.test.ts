import { describe, expect, it } from 'vitest'
import { claudeCodeEnvironment } from '../src/index.js'

const parent = {
  PATH: '/usr/bin',
  HOME: '/root',
  ANTHROPIC_API_KEY: 'sk-parent',
  GITHUB_TOKEN: 'ghp',
  npm_config__authToken: 'npm',
  DB_PASSWORD: 'pw',
  AWS_SECRET_ACCESS_KEY: 'aws',
  IS_SANDBOX: 'yes',
  UNSET: undefined,
}

describe('claude-code child environment', () => {
  it('is the parent\'s minus credential-shaped names (any case), plus the configured env, which wins', () => {
    const env = claudeCodeEnvironment(parent, { env: { HOME: '/tmp/home', ANTHROPIC_API_KEY: 'sk-configured' }, passEnv: [], isRoot: false })
    expect(env).toEqual({ PATH: '/usr/bin', HOME: '/tmp/home', ANTHROPIC_API_KEY: 'sk-configured' })
  })

  it('passEnv lets named credential-shaped variables through, and only those', () => {
    const env = claudeCodeEnvironment(parent, { env: {}, passEnv: ['ANTHROPIC_API_KEY'], isRoot: false })
    expect(env.ANTHROPIC_API_KEY).toBe('sk-parent')
    expect(env.GITHUB_TOKEN).toBeUndefined()
  })

  it('as root, IS_SANDBOX becomes 1 (the only value Claude Code accepts) unless the configured env sets it', () => {
    expect(claudeCodeEnvironment(parent, { env: {}, passEnv: [], isRoot: true }).IS_SANDBOX).toBe('1')
    expect(claudeCodeEnvironment(parent, { env: { IS_SANDBOX: 'yes' }, passEnv: [], isRoot: true }).IS_SANDBOX).toBe('yes')
  })

  it('not as root, an inherited IS_SANDBOX other than 1 is dropped, and 1 is kept', () => {
    expect(claudeCodeEnvironment(parent, { env: {}, passEnv: [], isRoot: false })).not.toHaveProperty('IS_SANDBOX')
    expect(claudeCodeEnvironment({ IS_SANDBOX: '1' }, { env: {}, passEnv: [], isRoot: false }).IS_SANDBOX).toBe('1')
  })
})
