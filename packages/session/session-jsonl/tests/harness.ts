import { mkdtemp, readFile, rm } from 'node:fs/promises'
import { tmpdir } from 'node:os'
import { join } from 'node:path'
import { Context, Logger, type Exporter } from 'cordis'
import { SessionStore, type Session } from '@dsh/session'
import SessionJsonl from '@dsh/session-jsonl'
import { afterEach } from 'vitest'

const dirs: string[] = []
afterEach(async () => {
  await Promise.all(dirs.splice(0).map((dir) => rm(dir, { recursive: true, force: true })))
})

/** A fresh temp directory, removed after the test. */
export async function tempDir(): Promise<string> {
  const dir = await mkdtemp(join(tmpdir(), 'dsh-session-jsonl-'))
  dirs.push(dir)
  return dir
}

/** Warnings logged in `ctx`, formatted as a person would read them. */
export function captureWarnings(ctx: Context): string[] {
  const warnings: string[] = []
  const exporter: Exporter = {
    colors: false,
    levels: { default: 3 },
    export(message) {
      if (message.type === 'warn') warnings.push(`${message.name}: ${Logger.format(exporter, message)}`)
    },
  }
  ctx.logger.exporter(exporter)
  return warnings
}

/** A real context with the real session store and the JSONL plugin on `dir` (one "process"). */
export async function startProcess(dir: string) {
  const ctx = new Context()
  const warnings = captureWarnings(ctx)
  await ctx.plugin(SessionStore)
  const fiber = await ctx.plugin(SessionJsonl, { dir })
  return { ctx, fiber, warnings, sessions: ctx.sessions }
}

/** A small, complete turn. */
export function appendTurn(session: Session, turn: number, text: string): void {
  session.append({ type: 'turn/start', turn })
  session.append({ type: 'user/message', message: { role: 'user', content: [{ type: 'text', text }] } })
  session.append({ type: 'step/start', step: 1 })
  session.append({ type: 'assistant/message', message: { role: 'assistant', content: [{ type: 'text', text: `re: ${text}` }] }, finish: 'stop', usage: { inputTokens: 3, outputTokens: 4 } })
  session.append({ type: 'step/end', step: 1 })
  session.append({ type: 'turn/end', turn, reason: 'completed' })
}

export async function fileLines(file: string): Promise<string[]> {
  const text = await readFile(file, 'utf8')
  return text.split('\n')
}
