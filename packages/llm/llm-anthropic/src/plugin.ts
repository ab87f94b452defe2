import type { Context } from 'cordis'
import { AnthropicAdapter } from './adapter.js'
import { AnthropicConfig } from './config.js'

/**
 * Registers one Messages endpoint as an adapter on `ctx.llm`. Load it once per provider
 * with a different `name`; the registration goes away with the plugin.
 */
export class AnthropicPlugin {
  static inject = ['llm']
  static Config = AnthropicConfig

  constructor(ctx: Context, config: AnthropicConfig) {
    // The key is read here, at start: a missing one fails requests, not the load.
    ctx.llm.registerAdapter(new AnthropicAdapter(config))
  }
}
