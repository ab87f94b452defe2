import { describe, expect, it } from 'vitest'
import { config } from 'zod/v4/core'

describe("zod's parser mode under the ACP server", () => {
  it('importing the server turns off compiled parsers, so a short-lived child does not compile one per message type', async () => {
    await import('@dsh/acp-server')
    expect(config().jitless).toBe(true)
  })
})
