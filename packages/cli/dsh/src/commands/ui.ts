/**
 * `dsh ui`: the delegation trees of a session directory in a browser, live. Serves a local
 * page on 127.0.0.1 (an OS-chosen port unless --port says) and prints its URL, with the
 * token every request must carry, as the only line on stdout. Another address needs
 * --token-env naming the variable holding a token of the user's choosing. Runs until
 * SIGTERM/SIGINT, then exits 0.
 *
 * `dsh run --ui` serves the same page from the running process (`startRunUi`), over the
 * run's session directory, with what only the process knows: the approval requests waiting
 * now, answered from the page, and the children queued for a slot.
 */
import type { Context } from 'cordis'
import type { Agent } from '@dsh/agent'
import type {} from '@dsh/approvals'
import { dirname } from 'node:path'
import { parseVerbArgs, wholeNumberOption } from '../args.js'
import { defaultSessionDir } from '../defaults.js'
import { UsageError } from '../errors.js'
import { exitCodeOfSignal } from '../exit.js'
import { onInterrupt } from '../interrupt.js'
import { resolve } from 'node:path'
import { statSync } from 'node:fs'

export async function uiVerb(args: string[]): Promise<number> {
  const { values, positionals } = parseVerbArgs('ui', {
    args,
    allowPositionals: true,
    options: {
      host: { type: 'string', default: '127.0.0.1' },
      port: { type: 'string', default: '0' },
      'session-dir': { type: 'string' },
      'token-env': { type: 'string' },
    },
  })
  if (positionals.length > 0) throw new UsageError('USAGE', `dsh ui: takes no positional arguments (got "${positionals[0]}")`)
  const port = wholeNumberOption('dsh ui', '--port', values.port, 0, 65_535)!
  const sessionDir = values['session-dir'] ? resolve(values['session-dir']) : defaultSessionDir()
  try {
    if (!statSync(sessionDir).isDirectory()) throw new Error('not a directory')
  } catch {
    throw new UsageError('USAGE', `dsh ui: ${sessionDir} is not a session directory (pass --session-dir DIR)`)
  }
  let token: string | undefined
  if (values['token-env'] !== undefined) {
    token = process.env[values['token-env']]
    if (!token || token.length < 16) throw new UsageError('USAGE', `dsh ui: --token-env names ${values['token-env']}, which is not set or holds fewer than 16 characters`)
  }
  const { serveUi, UiError } = await import('@dsh/ui-server')
  let server
  try {
    server = await serveUi({ sessionDir, host: values.host, port, token })
  } catch (error) {
    if (error instanceof UiError) throw new UsageError('USAGE', `dsh ui: ${error.message}`)
    throw error
  }
  process.stdout.write(`${server.url}\n`)
  process.stderr.write(`dsh ui: serving the sessions of ${sessionDir}\n`)
  let stop!: () => void
  const stopped = new Promise<void>((resolvePromise) => (stop = resolvePromise))
  const stopSignals = onInterrupt(
    () => stop(),
    (signal) => process.exit(exitCodeOfSignal(signal)),
  )
  await stopped
  await server.close()
  stopSignals()
  return 0
}

/** The page of a running `dsh run --ui`; `close` stops answering and serving. */
export interface RunUi {
  url: string
  close(): Promise<void>
}

/**
 * Serve the page from this run (loopback, an OS-chosen port, a fresh token) over the
 * directory `agent`'s session is stored in, and print its URL on stderr. With `answers`
 * the page is the run's one approval front-end: every request no rule decided waits there
 * until it is answered, withdrawn or times out (`approvals.timeoutMs`). Without it (the
 * run has `--permission`), the page shows the requests and who answers them.
 */
export async function startRunUi(ctx: Context, agent: Agent, options: { answers: boolean }): Promise<RunUi> {
  if (options.answers && !ctx.get('approvals')) throw new UsageError('USAGE', 'dsh run --ui: the composition has no approval broker (- id: approvals, name: "@dsh/approvals"), so the page could not answer side effects; add it back to dsh.yml')
  const file = ctx.sessions.locate(agent.id)
  if (file === undefined) throw new UsageError('USAGE', 'dsh run --ui: this run keeps no session files (no session store is composed), so there is nothing for the page to show')
  const { serveUi, RunDesk } = await import('@dsh/ui-server')
  const desk = new RunDesk(ctx, { answers: options.answers })
  let server
  try {
    server = await serveUi({ sessionDir: dirname(file), live: desk })
  } catch (error) {
    desk.dispose()
    throw error
  }
  process.stderr.write(`dsh: the run's page (${options.answers ? 'approvals are answered there' : 'it shows approvals; --permission decides them'}): ${server.url}\n`)
  return {
    url: server.url,
    close: async () => {
      desk.dispose()
      await server.close()
    },
  }
}
