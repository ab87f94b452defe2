/** `dsh acp` on a raw pipe: frames written byte for byte, every stdout line kept and checked. */
import type { ChildProcess } from 'node:child_process'
import { spawnDshAcp } from './acp-trust-client.js'

export interface RawFrame {
  jsonrpc?: string
  id?: string | number | null
  method?: string
  result?: unknown
  error?: { code: number; message: string; data?: unknown }
}

export interface RawServed {
  child: ChildProcess
  /** Resolves with the response whose id is `id` (the first not yet taken). */
  response(id: string | number | null): Promise<RawFrame>
  /** Every stdout line so far; a line that is not a JSON-RPC object fails `assertProtocolOnly`. */
  lines(): string[]
  assertProtocolOnly(): void
  stderr(): string
  send(frame: unknown): void
  write(bytes: string | Buffer): Promise<void>
  exited: Promise<{ code: number | null; signal: NodeJS.Signals | null }>
}

export function serveRaw(args: string[]): RawServed {
  const child = spawnDshAcp(args)
  const lines: string[] = []
  const waiting: Array<{ id: string | number | null; resolve: (frame: RawFrame) => void }> = []
  const unclaimed: RawFrame[] = []
  let partial = ''
  let stderr = ''
  child.stderr!.on('data', (chunk: Buffer) => (stderr += chunk.toString('utf8')))
  child.stdout!.on('data', (chunk: Buffer) => {
    partial += chunk.toString('utf8')
    let newline
    while ((newline = partial.indexOf('\n')) !== -1) {
      const line = partial.slice(0, newline)
      partial = partial.slice(newline + 1)
      lines.push(line)
      let frame: RawFrame
      try {
        frame = JSON.parse(line) as RawFrame
      } catch {
        continue
      }
      if (!('result' in frame) && !('error' in frame)) continue
      const at = waiting.findIndex((entry) => entry.id === frame.id)
      if (at === -1) unclaimed.push(frame)
      else waiting.splice(at, 1)[0].resolve(frame)
    }
  })
  const exited = new Promise<{ code: number | null; signal: NodeJS.Signals | null }>((resolve) => child.on('close', (code, signal) => resolve({ code, signal })))
  const write = (bytes: string | Buffer) =>
    new Promise<void>((resolve, reject) => {
      child.stdin!.write(bytes, (error) => (error ? reject(error) : resolve()))
    })
  return {
    child,
    response: (id) => {
      const at = unclaimed.findIndex((frame) => frame.id === id)
      if (at !== -1) return Promise.resolve(unclaimed.splice(at, 1)[0])
      return new Promise((resolve) => waiting.push({ id, resolve }))
    },
    lines: () => [...lines],
    assertProtocolOnly: () => {
      if (partial !== '') throw new Error(`stdout ends in a partial line: ${JSON.stringify(partial.slice(0, 200))}`)
      for (const line of lines) {
        const frame = JSON.parse(line) as RawFrame
        if (typeof frame !== 'object' || frame === null || Array.isArray(frame) || frame.jsonrpc !== '2.0') throw new Error(`not a JSON-RPC frame on stdout: ${line.slice(0, 200)}`)
      }
    },
    stderr: () => stderr,
    send: (frame) => void write(`${JSON.stringify(frame)}\n`),
    write,
    exited,
  }
}

/** The peak resident memory of a process so far, in bytes (Linux `VmHWM`). */
export async function peakMemory(pid: number): Promise<number> {
  const { readFileSync } = await import('node:fs')
  const match = /VmHWM:\s+(\d+) kB/.exec(readFileSync(`/proc/${pid}/status`, 'utf8'))
  if (!match) throw new Error('no VmHWM in /proc status')
  return Number(match[1]) * 1024
}
