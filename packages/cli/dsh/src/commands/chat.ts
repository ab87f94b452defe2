/**
 * `dsh chat` and `dsh` with no command (or only options) on a terminal: the arguments of
 * an interactive session (without a terminal, one whose prompts are piped in). The
 * session itself is `../chat/session.ts`, loaded only here, so `dsh run` never reads it.
 */
import { parseVerbArgs } from '../args.js'
import { chatCommand } from '../chat/session.js'
import { parseRunPermission } from '../permission-prompt.js'

export async function chatVerb(args: string[]): Promise<number> {
  const { values } = parseVerbArgs('chat', {
    args: withOptionalResumeId(args),
    allowPositionals: false,
    options: {
      config: { type: 'string' },
      model: { type: 'string' },
      'session-dir': { type: 'string' },
      verbose: { type: 'boolean', default: false },
      resume: { type: 'string' },
      permission: { type: 'string' },
      record: { type: 'string' },
      'no-color': { type: 'boolean', default: false },
    },
  })
  return chatCommand({
    config: values.config,
    model: values.model,
    sessionDir: values['session-dir'],
    verbose: values.verbose,
    ...(values.resume !== undefined && { resume: values.resume }),
    ...(values.permission !== undefined && { permission: parseRunPermission(values.permission) }),
    ...(values.record !== undefined && { record: values.record }),
    ...(values['no-color'] && { color: false }),
  })
}

/** `--resume` with no id after it (last, or before another option) means the newest session: `--resume=`. */
function withOptionalResumeId(args: readonly string[]): string[] {
  return args.map((arg, index) => (arg === '--resume' && (index === args.length - 1 || args[index + 1]!.startsWith('-')) ? '--resume=' : arg))
}
