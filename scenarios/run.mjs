#!/usr/bin/env node
// npm run scenarios [-- --refresh | --record]: build, then run the scenario tier in that mode.
import { spawnSync } from 'node:child_process'

const flags = process.argv.slice(2)
const unknown = flags.filter((flag) => flag !== '--refresh' && flag !== '--record')
if (unknown.length > 0 || flags.length > 1) {
  process.stderr.write('usage: npm run scenarios [-- --refresh | --record]\n')
  process.exit(2)
}
const mode = flags[0] === '--refresh' ? 'refresh' : flags[0] === '--record' ? 'record' : 'replay'
const run = (command, args, env = {}) => spawnSync(command, args, { stdio: 'inherit', env: { ...process.env, ...env } }).status ?? 1
// The scenarios run the bundle (packages/cli/dsh/bin/dsh.cjs), which tsc -b alone leaves stale: the whole build.
const built = run('npm', ['run', 'build', '--silent'])
if (built !== 0) process.exit(built)
process.exit(run('npx', ['vitest', 'run', 'packages/cli/dsh/tests/scenarios.test.ts'], { DSH_SCENARIOS: mode }))
