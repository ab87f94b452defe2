#!/usr/bin/env node
/**
 * The closing line of `.ci/run`: `N passed, N failed`, read from vitest's JSON report and the
 * test command's exit status. Usage: `node scripts/test-summary.mjs REPORT STATUS`.
 *
 * vitest 4's report counts only tests in numFailedTests: a file whose beforeAll or afterAll
 * failed, or that did not import, has status "failed" with no failed test (its tests are
 * "skipped" or even "passed"), and an unhandled error fails the run with a report that says
 * success. So a failed file with no failed test counts as one failure, and a non-zero status
 * (vitest's, or the build's or preflight's before vitest ran) is never reported as 0 failed.
 * Lines before the last say what was counted beyond failed tests. Exits 1 when anything failed.
 */
import { existsSync, readFileSync } from 'node:fs'
import { relative } from 'node:path'

const [reportPath, statusText] = process.argv.slice(2)
const status = Number(statusText ?? 1)

/** `{ passed, failed, notes }` of a report (undefined when there is none) and the test command's status. */
function summarize(report, exitStatus) {
  const notes = []
  if (report === undefined) {
    notes.push(`no test report: the test command exited ${exitStatus} before vitest wrote one (the build, the preflight or vitest's start-up failed; see above)`)
    return { passed: 0, failed: 1, notes }
  }
  const failedFiles = (report.testResults ?? []).filter((file) => file.status === 'failed' && !(file.assertionResults ?? []).some((test) => test.status === 'failed'))
  for (const file of failedFiles) notes.push(`failed outside any test (a beforeAll/afterAll hook, or the file did not load): ${relative(process.cwd(), file.name)}${file.message ? `: ${file.message.split('\n')[0]}` : ''}`)
  let failed = (report.numFailedTests ?? 0) + failedFiles.length
  if (failed === 0 && (exitStatus !== 0 || report.success === false)) {
    notes.push(`the test command exited ${exitStatus} although no test or file failed in the report (an unhandled error; see vitest's "Unhandled Errors" above)`)
    failed = 1
  }
  return { passed: report.numPassedTests ?? 0, failed, notes }
}

let report
if (reportPath !== undefined && existsSync(reportPath)) {
  try {
    report = JSON.parse(readFileSync(reportPath, 'utf8'))
  } catch (error) {
    console.log(`${reportPath}: not a JSON report (${error.message})`)
  }
}
const { passed, failed, notes } = summarize(report, Number.isInteger(status) ? status : 1)
for (const note of notes) console.log(note)
console.log(`${passed} passed, ${failed} failed`)
process.exitCode = failed > 0 || status !== 0 ? 1 : 0
