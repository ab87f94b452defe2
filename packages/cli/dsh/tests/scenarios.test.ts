/**
 * The scenario tier: every `scenarios/<name>/` replayed keylessly through the built `dsh`
 * (a `dsh run`, or a `dsh chat` with its prompts piped in).
 * `npm run scenarios -- --refresh` writes the expectations instead of comparing;
 * `-- --record` re-records first (see scenarios/README.md and scenario-runner.ts).
 */
import { describe, expect, it } from 'vitest'
import { expectedOf, listScenarios, runScenario, writeExpected, type ScenarioMode } from './scenario-runner.js'

const mode = (process.env.DSH_SCENARIOS ?? 'replay') as ScenarioMode
if (!['replay', 'refresh', 'record'].includes(mode)) throw new Error(`DSH_SCENARIOS must be replay, refresh or record (got ${mode})`)
const scenarios = listScenarios()

describe.concurrent('scenarios', () => {
  it('there are scenarios to replay', () => {
    expect(scenarios.length).toBeGreaterThan(0)
  })

  for (const scenario of scenarios) {
    it(`${scenario.name}: ${mode === 'replay' ? 'replays to the expected stdout and session logs' : `${mode === 'record' ? 'records' : 'refreshes'} its expectations`}`, async () => {
      const outcome = await runScenario(scenario, mode)
      expect(outcome.code, outcome.stderr).toBe(scenario.exitCode)
      if (mode !== 'replay') return writeExpected(scenario, outcome)
      const expected = expectedOf(scenario)
      expect(expected, `${scenario.name} has no expected/ yet: run npm run scenarios -- --refresh`).toBeDefined()
      expect(outcome.stdout).toBe(expected!.stdout)
      expect(Object.keys(outcome.sessions).sort()).toEqual(Object.keys(expected!.sessions).sort())
      for (const [key, log] of Object.entries(expected!.sessions)) expect(outcome.sessions[key], `session ${key}`).toBe(log)
    })
  }
})
