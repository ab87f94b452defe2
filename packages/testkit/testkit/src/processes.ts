/**
 * Process checks for tests that prove nothing outlives its run. Written here, apart from
 * `@dsh/process`, so a test of the reaping code does not check its work with that code.
 */

/** True while `pid` is in the process table (a zombie counts: it has not been reaped). */
export function exists(pid: number): boolean {
  try {
    process.kill(pid, 0)
    return true
  } catch (error) {
    if ((error as NodeJS.ErrnoException).code === 'ESRCH') return false
    throw error
  }
}
