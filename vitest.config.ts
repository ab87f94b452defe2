import { defineConfig } from 'vitest/config'

// Tests import workspace packages through the `dsh-source` export condition, so they run
// against TypeScript sources; tests that spawn the CLI as a process use the built dist/.
export default defineConfig({
  resolve: { conditions: ['dsh-source'] },
  ssr: { resolve: { conditions: ['dsh-source'] } },
  test: {
    include: ['packages/*/*/tests/**/*.test.ts'],
    testTimeout: 30_000,
    hookTimeout: 30_000,
    pool: 'forks',
  },
})
