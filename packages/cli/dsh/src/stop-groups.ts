/**
 * Taking down the process groups this process started (bash commands, ACP children),
 * for a command that must exit now. Each group is asked twice before the exit hook of
 * `@dsh/process` kills what is left: a `dsh acp` child treats the first SIGTERM as "stop"
 * and the second as "exit now", and in both cases takes its own process groups down
 * first, which it could not do if it were killed outright.
 */
import { goneWithin, groupHasLiveMembers, signalGroup, trackedGroups } from '@dsh/process'

/** How long each round waits for the groups to go before the next, harder, step. */
export const STOP_ROUND_MS = 1_000

export async function stopStartedGroups(roundMs = STOP_ROUND_MS): Promise<void> {
  for (let round = 0; round < 2; round++) {
    const groups = trackedGroups()
    if (groups.length === 0) return
    for (const pgid of groups) {
      try {
        signalGroup(pgid, 'SIGTERM')
      } catch {
        // EPERM: the group now holds a process that is not ours; the exit hook skips it too.
      }
    }
    await goneWithin(async () => (await Promise.all(groups.map((pgid) => groupHasLiveMembers(pgid)))).some(Boolean), roundMs)
  }
}
