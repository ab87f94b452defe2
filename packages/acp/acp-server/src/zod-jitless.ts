/**
 * The ACP SDK validates every incoming message with zod. By default zod compiles a
 * specialised parser (`new Function`) for each object schema the first time it parses
 * one: worth it for a hot loop, but a `dsh acp` child parses a handful of messages
 * (initialize, session/new, one prompt) and paid about 5 ms compiling parsers it used once.
 * zod reads this switch when a schema is built, so this module must be evaluated before
 * the SDK's schemas are: `index.ts` imports it first. Validation itself is unchanged.
 */
import { config } from 'zod/v4/core'

config({ jitless: true })
