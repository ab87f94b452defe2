import type { LlmAdapter } from '@dsh/llm'
import type { ReplayAdapter } from './replayer.js'

export * from './errors.js'
export * from './format.js'
export { parseRecording } from './parse.js'
export { firstDifference, type Difference } from './diff.js'
export { Lineage, type SessionFacts } from './lineage.js'
export { Recorder } from './recorder.js'
export { RecordingRouter, type DefaultLink } from './router.js'
export { Replay, ReplayAdapter } from './replayer.js'
export { ReplayPlugin } from './plugin.js'
export { ReplayPlugin as default } from './plugin.js'

/** Whether `adapter` is a replay adapter (by shape: a host may hold another copy of this module). */
export function isReplayAdapter(adapter: LlmAdapter | undefined): adapter is ReplayAdapter {
  return adapter !== undefined && typeof (adapter as Partial<ReplayAdapter>).problems === 'function'
}
