import { readdirSync, readFileSync } from 'node:fs'

/** Live processes whose command line mentions `marker` (a zombie has an empty one, so it does not count). */
export function processesMentioning(marker: string): number[] {
  return readdirSync('/proc')
    .filter((entry) => /^\d+$/.test(entry) && Number(entry) !== process.pid)
    .filter((pid) => {
      try {
        return readFileSync(`/proc/${pid}/cmdline`, 'utf8').replaceAll('\0', ' ').includes(marker)
      } catch {
        // Gone between the listing and the read.
        return false
      }
    })
    .map(Number)
}

/** Poll until `ready()` (a condition, not a clock); throws with `why()` if `gaveUp()` says the wait is hopeless. */
export async function until(ready: () => boolean, gaveUp: () => string | undefined = () => undefined): Promise<void> {
  while (!ready()) {
    const reason = gaveUp()
    if (reason !== undefined) throw new Error(reason)
    await new Promise((resolve) => setTimeout(resolve, 25))
  }
}
