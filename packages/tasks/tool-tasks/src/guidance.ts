/** Where background-work guidance sits in the system prompt (after delegation guidance). */
export const TASKS_SECTION_ORDER = 300

/**
 * The background-work habit: start independent work in the background, keep working,
 * collect results with `task_output` once told they finished, and never poll.
 */
export const TASKS_GUIDANCE = [
  '# Background work',
  '- When a piece of work does not block your next steps (a long build or test run, a delegated investigation), start it in the background and keep working on something else meanwhile.',
  '- You get a message when background work finishes. Collect its result with task_output then.',
  '- Do not poll: no repeated task_output or task_list calls to see whether something is done. If nothing is left to do but wait, call task_output once with wait: true.',
  '- Stop background work you no longer need with task_kill.',
].join('\n')
