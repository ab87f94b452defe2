import { describe, expect, it } from 'vitest'
import { BASE_ENVIRONMENT, childEnvironment, isBaseEnvironmentName } from '@dsh/process'

const parent = {
  PATH: '/bin',
  HOME: '/home/u',
  LANG: 'C.UTF-8',
  LC_ALL: 'C',
  TERM: 'xterm',
  TMPDIR: '/tmp/u',
  DSH_HOME: '/home/u/.dsh',
  // credentials that no name filter recognises
  DATABASE_URL: 'postgres://u:pw@db/app',
  MYSQL_PWD: 'pw',
  GH_PAT: 'ghp_x',
  SLACK_WEBHOOK_URL: 'https://hooks.example/T0/B0/x',
  OPENAI_API_KEY: 'sk-1',
  NODE_OPTIONS: '--require /tmp/inject.js',
  UNSET: undefined,
}

describe('the child environment', () => {
  it('is the base allow-list only: credentials of any name, and everything else, stay with the parent', () => {
    expect(childEnvironment(parent)).toEqual({ PATH: '/bin', HOME: '/home/u', LANG: 'C.UTF-8', LC_ALL: 'C', TERM: 'xterm', TMPDIR: '/tmp/u', DSH_HOME: '/home/u/.dsh' })
  })

  it('the base is where programs and files are, who and where the user is, locale, terminal and temp dirs', () => {
    for (const name of ['PATH', 'HOME', 'USER', 'SHELL', 'LANG', 'LC_CTYPE', 'LC_MESSAGES', 'TZ', 'TERM', 'TMPDIR', 'TMP', 'TEMP', 'XDG_RUNTIME_DIR', 'DSH_HOME']) {
      expect(isBaseEnvironmentName(name)).toBe(true)
    }
    for (const name of ['DATABASE_URL', 'MYSQL_PWD', 'GH_PAT', 'SLACK_WEBHOOK_URL', 'AWS_ACCESS_KEY_ID', 'NODE_OPTIONS', 'LD_PRELOAD', 'LC_', 'lc_all', 'path']) {
      expect(isBaseEnvironmentName(name)).toBe(false)
    }
    expect(BASE_ENVIRONMENT).toContain('PATH')
  })

  it("OpenTelemetry's configuration reaches every child, but the exporter's headers (the collector's key) only an agent child", () => {
    const traced = { PATH: '/bin', OTEL_EXPORTER_OTLP_ENDPOINT: 'http://127.0.0.1:4318', OTEL_SERVICE_NAME: 'dsh', OTEL_EXPORTER_OTLP_HEADERS: 'api-key=secret', OTEL_EXPORTER_OTLP_TRACES_HEADERS: 'api-key=secret2' }
    // A command a model asked for (bash) must not be able to read the key.
    expect(childEnvironment(traced)).toEqual({ PATH: '/bin', OTEL_EXPORTER_OTLP_ENDPOINT: 'http://127.0.0.1:4318', OTEL_SERVICE_NAME: 'dsh' })
    expect(childEnvironment(traced, { agentChild: true })).toEqual(traced)
    expect(isBaseEnvironmentName('OTEL_EXPORTER_OTLP_HEADERS')).toBe(false)
  })

  it("an OpenTelemetry endpoint holding a credential (a user or password, a query, an unreadable URL) and any OTEL_* password, token or key reach only an agent child", () => {
    const traced = {
      PATH: '/bin',
      OTEL_EXPORTER_OTLP_ENDPOINT: 'https://dsh:pa55w0rd@collector.example:4318',
      OTEL_EXPORTER_OTLP_TRACES_ENDPOINT: 'https://collector.example/v1/traces?api_key=t0ken',
      OTEL_EXPORTER_OTLP_METRICS_ENDPOINT: 'not a url, maybe a secret',
      OTEL_EXPORTER_OTLP_LOGS_ENDPOINT: 'https://collector.example:4318',
      OTEL_EXPORTER_JAEGER_PASSWORD: 'pa55w0rd',
      OTEL_EXPORTER_OTLP_CLIENT_KEY: '/etc/otel/client.key',
      OTEL_SERVICE_NAME: 'dsh',
    }
    // A command a model asked for gets the endpoint without a credential, and nothing else of it.
    expect(childEnvironment(traced)).toEqual({ PATH: '/bin', OTEL_EXPORTER_OTLP_LOGS_ENDPOINT: 'https://collector.example:4318', OTEL_SERVICE_NAME: 'dsh' })
    expect(childEnvironment(traced, { agentChild: true })).toEqual(traced)
    expect(isBaseEnvironmentName('OTEL_EXPORTER_OTLP_ENDPOINT', 'https://dsh:pa55w0rd@collector.example:4318')).toBe(false)
    expect(isBaseEnvironmentName('OTEL_EXPORTER_OTLP_ENDPOINT', 'http://127.0.0.1:4318')).toBe(true)
  })

  it('passEnv adds named parent variables by exact name, and the configured env wins over everything', () => {
    const env = childEnvironment(parent, { passEnv: ['OPENAI_API_KEY', 'NODE_OPTIONS', 'UNSET', 'NOT_IN_PARENT'], env: { HOME: '/tmp/child-home', EXTRA: '1' } })
    expect(env).toEqual({
      PATH: '/bin',
      HOME: '/tmp/child-home',
      LANG: 'C.UTF-8',
      LC_ALL: 'C',
      TERM: 'xterm',
      TMPDIR: '/tmp/u',
      DSH_HOME: '/home/u/.dsh',
      OPENAI_API_KEY: 'sk-1',
      NODE_OPTIONS: '--require /tmp/inject.js',
      EXTRA: '1',
    })
  })
})
