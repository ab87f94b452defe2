/**
 * How a command's failure reaches the user. A mistake in what they typed or configured,
 * or a session file that cannot be read, is one readable line and exit code 2; only an
 * unexpected failure (a bug) shows its stack, with exit code 1.
 */
import { constants as osConstants } from 'node:os'
import { errorMessage, printable } from '@dsh/base'
import { SessionError } from '@dsh/session'
import { SessionJsonlError } from '@dsh/session-jsonl'
import { CompositionError, oneLineMessage, UsageError } from './errors.js'

export const EXIT_USAGE = 2
export const EXIT_FAILURE = 1

/** The shell convention: a command ended by signal N exits 128 + N (130 for SIGINT, 143 for SIGTERM). */
export function exitCodeOfSignal(signal: NodeJS.Signals): number {
  return 128 + (osConstants.signals[signal] ?? osConstants.signals.SIGTERM)
}

/** The line to print for an error the user can fix, or undefined for an unexpected one. */
export function userFacingLine(error: unknown): string | undefined {
  // Messages can quote a file or a peer: print them so their bytes cannot act on the terminal.
  if (error instanceof UsageError || error instanceof CompositionError) return printable(error.message)
  if (error instanceof SessionError || error instanceof SessionJsonlError) return `dsh: ${printable(error.message)}`
  if (isParseArgsError(error)) return `dsh: ${oneLineMessage(error)}`
  if (isMissingModule(error)) return `dsh: ${printable(error.message.split('\n')[0])}${error.message.startsWith('Cannot find') ? '; this installation of dsh is incomplete: reinstall @dsh/cli with its dependencies' : ''}`
  return undefined
}

/** Print `error` for the user and give the exit code it deserves. */
export function reportFailure(error: unknown, write: (text: string) => void = (text) => process.stderr.write(text)): number {
  const line = userFacingLine(error)
  if (line !== undefined) {
    write(`${line}\n`)
    return EXIT_USAGE
  }
  write(`dsh: ${error instanceof Error ? (error.stack ?? error.message) : errorMessage(error)}\n`)
  return EXIT_FAILURE
}

/**
 * A module the installed CLI cannot find (a package removed, or left out of a set of
 * tarballs): an installation to repair, not a bug. Node's message goes on with the
 * require stack, which names our own files; only its first line is printed.
 */
function isMissingModule(error: unknown): error is Error {
  if (!(error instanceof Error) || !('code' in error)) return false
  const { code } = error as { code: unknown }
  return code === 'MODULE_NOT_FOUND' || code === 'ERR_MODULE_NOT_FOUND'
}

function isParseArgsError(error: unknown): error is Error {
  return error instanceof Error && 'code' in error && String((error as { code: unknown }).code).startsWith('ERR_PARSE_ARGS')
}
