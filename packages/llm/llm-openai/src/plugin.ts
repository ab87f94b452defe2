import type { Context } from 'cordis'
import { OpenAIChatAdapter } from './adapter.js'
import { OpenAIChatConfig } from './config.js'

/**
 * Registers one OpenAI-compatible endpoint as an adapter on `ctx.llm`. Load it once per
 * provider with a different `name`; the registration goes away with the plugin.
 */
export class OpenAIChatPlugin {
  static inject = ['llm']
  static Config = OpenAIChatConfig

  constructor(ctx: Context, config: OpenAIChatConfig) {
    // The key is read here, at start: a missing one fails requests, not the load.
    ctx.llm.registerAdapter(new OpenAIChatAdapter(config))
  }
}
