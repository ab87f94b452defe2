import { mkdtempSync, readdirSync, readFileSync, writeFileSync } from 'node:fs'
import { tmpdir } from 'node:os'
import { join } from 'node:path'

/**
 * A throw-away CODEX_HOME whose config.toml points Codex at a fake Responses server
 * (the offline recipe of PEERS.md: no retries, no update check, no analytics, no plugins).
 */
export function codexHome(baseUrl: string): string {
  const home = mkdtempSync(join(tmpdir(), 'dsh-codex-home-'))
  writeFileSync(
    join(home, 'config.toml'),
    [
      'model = "gpt-5.5"',
      'model_provider = "fake"',
      'check_for_update_on_startup = false',
      '',
      '[model_providers.fake]',
      'name = "fake"',
      `base_url = "${baseUrl}"`,
      'env_key = "FAKE_CODEX_API_KEY"',
      'wire_api = "responses"',
      'request_max_retries = 0',
      'stream_max_retries = 0',
      '',
      '[analytics]',
      'enabled = false',
      '',
      '[features]',
      'plugins = false',
      '',
    ].join('\n'),
  )
  return home
}

/** Pids of `app-server` processes this test process started (its direct children). */
export function appServerPids(): number[] {
  return readdirSync('/proc')
    .filter((name) => /^\d+$/.test(name))
    .map(Number)
    .filter((pid) => {
      try {
        const stat = readFileSync(`/proc/${pid}/stat`, 'utf8')
        const fields = stat.slice(stat.lastIndexOf(')') + 2).split(' ')
        if (Number(fields[1]) !== process.pid || fields[0] === 'Z') return false
        return readFileSync(`/proc/${pid}/cmdline`, 'utf8').split('\0').includes('app-server')
      } catch {
        // Exited while we looked.
        return false
      }
    })
}

/** The environment a running process was started with. */
export function environOf(pid: number): Record<string, string> {
  const entries = readFileSync(`/proc/${pid}/environ`, 'utf8').split('\0').filter(Boolean)
  return Object.fromEntries(entries.map((entry) => [entry.slice(0, entry.indexOf('=')), entry.slice(entry.indexOf('=') + 1)]))
}

export { exists } from '@dsh/testkit'

/**
 * Polls `check` until it returns a value other than `undefined`/`false`. No deadline of its
 * own (a busy machine is slow, not wrong): the test's timeout bounds it, and a wait that has
 * gone on for a while says once on stderr what it is waiting for, to name the hang.
 */
export async function waitFor<T>(check: () => T | undefined | false, what: string): Promise<T> {
  const noticeAt = Date.now() + 10_000
  let noticed = false
  for (;;) {
    const value = check()
    if (value !== undefined && value !== false) return value
    if (!noticed && Date.now() > noticeAt) {
      noticed = true
      console.warn(`still waiting for ${what}`)
    }
    await new Promise((resolve) => setTimeout(resolve, 20))
  }
}
