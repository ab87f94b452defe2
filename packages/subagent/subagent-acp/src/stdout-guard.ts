/**
 * Watches the child's stdout while it starts. An ACP agent's stdout carries protocol
 * frames only; a program that prints anything else there first (a banner, a usage
 * message, the wrong program altogether) is not an ACP agent, and saying so at once
 * beats waiting out the startup timeout. The SDK still reads every byte: the guard only
 * looks, and once the agent has answered `initialize` it steps aside.
 */

import { isRecord } from '@dsh/base'

/** Lines longer than this are not inspected (a real frame can be large; the check is a heuristic). */
const MAX_INSPECTED_LINE = 64 * 1024

export class StdoutGuard {
  /** Called once, with the start of the first line that is not a JSON object. */
  onGarbage: ((line: string) => void) | undefined
  private armed = true
  private pending = ''
  private readonly decoder = new TextDecoder()
  readonly stream: TransformStream<Uint8Array, Uint8Array>

  constructor() {
    this.stream = new TransformStream<Uint8Array, Uint8Array>({
      transform: (chunk, controller) => {
        if (this.armed) this.inspect(chunk)
        controller.enqueue(chunk)
      },
    })
  }

  /** Stop inspecting: the agent has proven it speaks ACP. */
  disarm(): void {
    this.armed = false
    this.pending = ''
  }

  private inspect(chunk: Uint8Array): void {
    this.pending += this.decoder.decode(chunk, { stream: true })
    let newline = this.pending.indexOf('\n')
    while (newline >= 0 && this.armed) {
      const line = this.pending.slice(0, newline).trim()
      this.pending = this.pending.slice(newline + 1)
      if (line && !isJsonObject(line)) {
        this.armed = false
        this.onGarbage?.(line.length > 200 ? `${line.slice(0, 200)}…` : line)
        return
      }
      newline = this.pending.indexOf('\n')
    }
    if (this.pending.length > MAX_INSPECTED_LINE) this.disarm()
  }
}

function isJsonObject(line: string): boolean {
  try {
    return isRecord(JSON.parse(line))
  } catch {
    // Not JSON at all: exactly what the guard is looking for.
    return false
  }
}
