/**
 * `dsh ui`: the delegation trees of a session directory in a browser, live. Serves a local
 * page on 127.0.0.1 (an OS-chosen port unless --port says) and prints its URL, with the
 * token every request must carry, as the only line on stdout. Another address needs
 * --token-env naming the variable holding a token of the user's choosing. Runs until
 * SIGTERM/SIGINT, then exits 0.
 */
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
