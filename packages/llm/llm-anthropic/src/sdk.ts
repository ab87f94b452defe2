/**
 * The Anthropic SDK, imported on the first request rather than when the plugin loads: the
 * default composition loads this plugin for `anthropic:` models, and a run on any other
 * model must not pay for parsing the SDK.
 */
export type AnthropicSdk = typeof import('@anthropic-ai/sdk')

let loading: Promise<AnthropicSdk> | undefined
let loaded: AnthropicSdk | undefined

/** The SDK, imported once per process. */
export function loadSdk(): Promise<AnthropicSdk> {
  loading ??= import('@anthropic-ai/sdk').then((sdk) => (loaded = sdk))
  return loading
}

/** The SDK if a request already imported it, else `undefined`: an error can only be one of its classes once it is loaded. */
export function loadedSdk(): AnthropicSdk | undefined {
  return loaded
}
