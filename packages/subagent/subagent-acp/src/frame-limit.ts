/**
 * How large one ACP frame may be, both ways. An agent that sends a longer line is not
 * read any further: the run ends `error` with a diagnostic naming the limit (the SDK's own
 * reader would close the connection with a bare error, and the next write would meet a
 * closed pipe). A prompt whose frame would be longer than the limit is refused before
 * the agent is started, since the agent (`dsh acp` has the same default) would refuse it.
 */
import { SubagentError } from '@dsh/subagent'
import type { TextBlock } from '@dsh/llm'

/** The same default as `dsh acp --max-frame-bytes`: 16 MiB. */
export const DEFAULT_MAX_FRAME_BYTES = 16 * 1024 * 1024

/** Room for the `session/prompt` envelope around the prompt blocks (method, ids, session id). */
const PROMPT_ENVELOPE_BYTES = 512

const NEWLINE = 0x0a

/** Counts the bytes of the current line of the agent's stdout; past the limit, forwards nothing more. */
export class FrameLimit {
  /** Called once, with the length the line had reached when it crossed the limit. */
  onOversized: ((bytes: number) => void) | undefined
  private lineBytes = 0
  private tripped = false
  readonly stream: TransformStream<Uint8Array, Uint8Array>

  constructor(readonly maxFrameBytes: number) {
    this.stream = new TransformStream<Uint8Array, Uint8Array>({
      transform: (chunk, controller) => {
        if (this.tripped) return
        let start = 0
        for (;;) {
          const newline = chunk.indexOf(NEWLINE, start)
          this.lineBytes += (newline === -1 ? chunk.length : newline) - start
          if (this.lineBytes > this.maxFrameBytes) {
            // The whole chunk is held back: the run ends here, and a partial frame helps no one.
            this.tripped = true
            this.onOversized?.(this.lineBytes)
            return
          }
          if (newline === -1) break
          this.lineBytes = 0
          start = newline + 1
        }
        controller.enqueue(chunk)
      },
    })
  }

  /** The diagnostic for an oversized frame, naming the limit and the key that sets it. */
  describe(bytes: number): string {
    return `the ACP agent sent a frame of at least ${bytes} bytes, over the ${this.maxFrameBytes}-byte frame limit (maxFrameBytes); nothing more was read from it, and it was stopped`
  }
}

/** Refuse a prompt whose `session/prompt` frame would exceed `maxFrameBytes`, before anything starts. */
export function refuseOversizedPrompt(provider: string, prompt: readonly TextBlock[], maxFrameBytes: number): void {
  const bytes = Buffer.byteLength(JSON.stringify(prompt.map((block) => ({ type: 'text', text: block.text }))), 'utf8') + PROMPT_ENVELOPE_BYTES
  if (bytes > maxFrameBytes) {
    throw new SubagentError(
      'INVALID_REQUEST',
      `the prompt for the "${provider}" ACP agent would be a frame of about ${bytes} bytes, over the ${maxFrameBytes}-byte frame limit (maxFrameBytes); send a shorter prompt (point the agent at a file instead of inlining it), or raise maxFrameBytes if the agent accepts larger frames`,
    )
  }
}
