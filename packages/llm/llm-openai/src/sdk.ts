/**
 * The OpenAI SDK, imported on the first request rather than when the plugin loads: the
 * default composition loads this plugin for `deepseek:` and `openai:` models, and a run
 * with any other model must not pay for parsing the SDK.
 */
import { importOnFirstUse } from '@dsh/base'

export type OpenAISdk = typeof import('openai')

const sdk = importOnFirstUse((): Promise<OpenAISdk> => import('openai'))

/** The SDK, imported once per process. */
export function loadSdk(): Promise<OpenAISdk> {
  return sdk.load()
}

/**
 * The SDK if a request already imported it, else `undefined`. Error mapping reads its
 * classes through this: an error can only be one of the SDK's once the SDK is loaded.
 */
export function loadedSdk(): OpenAISdk | undefined {
  return sdk.loaded()
}
