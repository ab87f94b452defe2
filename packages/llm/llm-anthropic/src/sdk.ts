/**
 * The Anthropic SDK, imported on the first request rather than when the plugin loads: the
 * default composition loads this plugin for `anthropic:` models, and a run on any other
 * model must not pay for parsing the SDK.
 */
import { importOnFirstUse } from '@dsh/base'

export type AnthropicSdk = typeof import('@anthropic-ai/sdk')

const sdk = importOnFirstUse((): Promise<AnthropicSdk> => import('@anthropic-ai/sdk'))

/** The SDK, imported once per process. */
export function loadSdk(): Promise<AnthropicSdk> {
  return sdk.load()
}

/** The SDK if a request already imported it, else `undefined`: an error can only be one of its classes once it is loaded. */
export function loadedSdk(): AnthropicSdk | undefined {
  return sdk.loaded()
}
