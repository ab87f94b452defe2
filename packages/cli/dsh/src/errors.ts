import { DshError, errorMessage, printable } from '@dsh/base'

/**
 * What the user typed cannot be acted on: a missing argument, an unknown verb, no model,
 * a session id or file that cannot be read. Printed as one line; the exit code is 2.
 */
export type UsageErrorCode = 'USAGE' | 'NO_MODEL' | 'SESSION'
export class UsageError extends DshError<UsageErrorCode> {}

/**
 * The plugin list cannot be composed: the config file cannot be read or parsed, an entry
 * is malformed or has a key its plugin does not know, a plugin cannot be loaded, fails to
 * start, waits for a service nobody provides, or names a provider or model adapter that
 * is not there, or the config found in the working directory is not trusted. Printed as
 * one line; the exit code is 2.
 */
export type CompositionErrorCode = 'CONFIG_READ' | 'CONFIG_SYNTAX' | 'CONFIG_SHAPE' | 'UNKNOWN_KEY' | 'PLUGIN_LOAD' | 'PLUGIN_START' | 'PLUGIN_WAITING'
  /** A tool bound to a provider, or a default model naming an adapter, that is not registered. */
  | 'UNRESOLVED'
  /** A project's ./dsh.yml the user has not trusted (or that changed since): not used. */
  | 'CONFIG_UNTRUSTED'
export class CompositionError extends DshError<CompositionErrorCode> {
  /**
   * The entries the problem is in, when it is in some (a plugin that failed to load or
   * start, an unknown key, an unmounted tool): the config file is named in the message
   * only when one of them came from it, so a problem with `--model` does not send the user
   * to a file that has nothing to do with it.
   */
  readonly entryIds: readonly string[]
  constructor(code: CompositionErrorCode, message: string, options?: { cause?: unknown; entryIds?: readonly string[] }) {
    super(code, message, options)
    this.entryIds = options?.entryIds ?? []
  }
}

/** An error's message on one line, for reports that must stay one line per problem. */
export function oneLineMessage(error: unknown): string {
  return printable(errorMessage(error).replace(/\s*\n\s*/g, ' '))
}
