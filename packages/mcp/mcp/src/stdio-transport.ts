/**
 * The SDK's transport over a server started as a process tree of its own (`@dsh/process`):
 * its own process group, tracked until reaped, so stopping the server stops everything it
 * started, and an abrupt exit of dsh leaves nothing running. The SDK's own stdio transport
 * signals only the one process and hands the server dsh's environment by its own list.
 */
import { describeExit, ProcessTree } from '@dsh/process'
import { ReadBuffer, serializeMessage } from '@modelcontextprotocol/sdk/shared/stdio.js'
import type { Transport } from '@modelcontextprotocol/sdk/shared/transport.js'
import type { JSONRPCMessage } from '@modelcontextprotocol/sdk/types.js'

/** The longest message a server may send, in bytes (the SDK's reader's bound): a larger one ends the connection. */
export const MAX_MESSAGE_BYTES = 10 * 1024 * 1024

export interface StdioSpawn {
  server: string
  command: string
  args: string[]
  env: Record<string, string>
  cwd?: string
}

export class ProcessStdioTransport implements Transport {
  onclose?: () => void
  onerror?: (error: Error) => void
  onmessage?: (message: JSONRPCMessage) => void
  /** Why the connection ended, in words that follow the server's name; set before `onclose`. */
  closeReason: string | undefined
  private tree: ProcessTree | undefined
  private readonly buffer = new ReadBuffer({ maxBufferSize: MAX_MESSAGE_BYTES })
  private closed = false

  constructor(private readonly spawn: StdioSpawn) {}

  async start(): Promise<void> {
    const tree = new ProcessTree({ command: this.spawn.command, args: this.spawn.args, env: this.spawn.env, ...(this.spawn.cwd !== undefined && { cwd: this.spawn.cwd }) })
    this.tree = tree
    tree.child.stdout!.on('data', (chunk: Buffer) => this.receive(chunk))
    tree.child.stdin!.on('error', () => {}) // a write to a server that died: its exit says why
    void tree.exited.then(async (exit) => {
      // Let stderr drain so the reason quotes the server's last words.
      await tree.exitWithin(0)
      const tail = tree.stderr()
      this.end(`${describeExit(exit)}${tail ? `: ${tail.split('\n').slice(-3).join(' | ')}` : ''}`)
    })
    try {
      await tree.spawned
    } catch (error) {
      this.end(`could not be started: ${(error as Error).message}`)
      throw error
    }
  }

  async send(message: JSONRPCMessage): Promise<void> {
    if (this.closed || !this.tree) throw new Error(`the server ${this.closeReason ?? 'is not running'}`)
    const stdin = this.tree.child.stdin!
    await new Promise<void>((resolve, reject) => stdin.write(serializeMessage(message), (error) => (error ? reject(error) : resolve())))
  }

  async close(): Promise<void> {
    this.end('was stopped')
    await this.tree?.reap({ stdinGraceMs: 500, termGraceMs: 1000 }).catch(() => {})
  }

  private receive(chunk: Buffer): void {
    if (this.closed) return
    try {
      this.buffer.append(chunk)
      for (let message = this.buffer.readMessage(); message; message = this.buffer.readMessage()) this.onmessage?.(message)
    } catch (error) {
      // Not JSON-RPC on stdout (a log line, garbage, a message past the bound): the stream
      // can no longer be trusted to frame messages, so the connection ends here, and every
      // call waiting on it ends with this reason instead of waiting for its timeout.
      const what = /exceeded maximum size/.test((error as Error).message)
        ? `sent a message over ${MAX_MESSAGE_BYTES / (1024 * 1024)} MB`
        : 'wrote something that is not JSON-RPC on stdout'
      this.end(what)
      void this.tree?.reap({ stdinGraceMs: 0, termGraceMs: 1000 }).catch(() => {})
    }
  }

  private end(reason: string): void {
    if (this.closed) return
    this.closed = true
    this.closeReason = reason
    this.onclose?.()
  }
}
