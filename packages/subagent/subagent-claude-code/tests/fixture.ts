/**
 * What every real-binary test needs: a fake Messages API on 127.0.0.1, a throw-away HOME
 * and CLAUDE_CONFIG_DIR, a real harness with the subagent service and this provider, and
 * a parent agent whose session cwd is a temp dir.
 */
import { chmodSync, existsSync, mkdirSync, mkdtempSync, readFileSync, writeFileSync } from 'node:fs'
import { tmpdir } from 'node:os'
import { join } from 'node:path'
import { text } from '@dsh/llm'
import type { Agent } from '@dsh/agent'
import { ApprovalService } from '@dsh/approvals'
import { SubagentService, type SubagentRequest } from '@dsh/subagent'
import { createHarness, type Harness } from '@dsh/testkit/harness'
import { startFakeAnthropicMessages, type FakeAnthropicMessages, type FakeMessagesAnswer } from '@dsh/testkit'
import { ClaudeCodePlugin, resolveClaudeExecutable, type ClaudeCodeRun } from '../src/index.js'

export interface Fixture {
  fake: FakeAnthropicMessages
  harness: Harness
  parent: Agent
  /** The parent session's cwd (a temp dir). */
  workDir: string
  /** The child's HOME; CLAUDE_CONFIG_DIR is `<home>/.claude`. */
  home: string
  start(prompt: string, extra?: Partial<SubagentRequest>): Promise<ClaudeCodeRun>
  dispose(): Promise<void>
}

export const realBinary = resolveClaudeExecutable()!

export function tempDir(prefix: string): string {
  return mkdtempSync(join(tmpdir(), prefix))
}

/** The environment PEERS.md prescribes for an offline Claude Code child. */
export function offlineEnv(fake: FakeAnthropicMessages, home: string): Record<string, string> {
  const configDir = join(home, '.claude')
  mkdirSync(configDir, { recursive: true })
  writeFileSync(join(configDir, 'settings.json'), JSON.stringify({ permissions: { defaultMode: 'default' } }))
  return {
    ANTHROPIC_BASE_URL: fake.url,
    ANTHROPIC_API_KEY: 'sk-ant-fake',
    CLAUDE_CODE_DISABLE_NONESSENTIAL_TRAFFIC: '1',
    DISABLE_AUTOUPDATER: '1',
    // The binary retries 5xx with backoff; a test wants the first answer to count.
    CLAUDE_CODE_MAX_RETRIES: '0',
    HOME: home,
    CLAUDE_CONFIG_DIR: configDir,
  }
}

/** `approvals`: compose the approval broker with this config (absent: no broker, as in a bare embedding). */
export async function setup(script: FakeMessagesAnswer[], config: Partial<ClaudeCodePlugin.Config> = {}, service: Partial<SubagentService.Config> = {}, approvals?: Partial<ApprovalService.Config>): Promise<Fixture> {
  const fake = await startFakeAnthropicMessages(script)
  const home = tempDir('dsh-cc-home-')
  const workDir = tempDir('dsh-cc-work-')
  const harness = await createHarness()
  if (approvals !== undefined) await harness.plugin(ApprovalService, approvals)
  await harness.plugin(SubagentService, service)
  await harness.plugin(ClaudeCodePlugin, { graceMs: 500, ...config, env: { ...offlineEnv(fake, home), ...config.env } })
  const parent = await harness.agent({ meta: { cwd: workDir } })
  return {
    fake,
    harness,
    parent,
    workDir,
    home,
    start: (prompt, extra = {}) =>
      harness.ctx.subagents.start('claude-code', { prompt: [text(prompt)], parent, signal: new AbortController().signal, ...extra }) as Promise<ClaudeCodeRun>,
    dispose: async () => {
      await harness.dispose()
      await fake.close()
    },
  }
}

/** True when no process with this pid exists (kill 0 fails with ESRCH). */
export function gone(pid: number): boolean {
  try {
    process.kill(pid, 0)
    return false
  } catch (error) {
    return (error as NodeJS.ErrnoException).code === 'ESRCH'
  }
}

/**
 * A stand-in `executable`: a shell script that appends its pid to a file, then runs
 * `body` (by default: exec the real binary, so the pid stays the same).
 */
export function wrapperScript(dir: string, body = `exec ${JSON.stringify(realBinary)} "$@"`): { path: string; pids(): number[] } {
  const path = join(dir, 'claude-wrapper.sh')
  const pidFile = join(dir, 'pids')
  writeFileSync(path, `#!/bin/sh\necho $$ >> ${JSON.stringify(pidFile)}\n${body}\n`)
  chmodSync(path, 0o755)
  return {
    path,
    pids: () => (existsSync(pidFile) ? readFileSync(pidFile, 'utf8').trim().split(/\s+/).filter(Boolean).map(Number) : []),
  }
}
