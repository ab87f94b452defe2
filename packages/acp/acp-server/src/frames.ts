/**
 * The NDJSON transport of `dsh acp`, with answers where the SDK's own gives up. Each line
 * is one JSON-RPC frame; a line over `maxFrameBytes` is never buffered whole: its first
 * bytes are kept to read its `id`, the rest is counted and dropped up to its newline.
 *
 * - an oversized request (it has an `id`) is answered with a JSON-RPC error naming the
 *   limit; an oversized response to one of our own requests settles that request with an
 *   error instead; a frame with no readable `id` gets one line on stderr;
 * - a line that is not JSON is answered with the standard parse error (-32700, id null);
 *   a JSON array (a batch: ACP has none) or scalar is an invalid request (-32600);
 * - none of these closes the connection: the next line is read as usual.
 */
import type { Readable, Writable } from 'node:stream'
import type { AnyMessage, Stream } from '@agentclientprotocol/sdk'
import { isRecord } from '@dsh/base'
import { readTopLevelFields } from './frame-head.js'

/** 16 MiB: ample for a prompt with embedded files, far below what would strain memory. */
export const DEFAULT_MAX_FRAME_BYTES = 16 * 1024 * 1024

/** How much of an oversized frame is kept to find its `id` (JSON-RPC peers put it first). */
const HEAD_BYTES = 4096

const NEWLINE = 0x0a

/** JSON-RPC 2.0's reserved codes used here. */
export const PARSE_ERROR = -32700
export const INVALID_REQUEST = -32600

export interface FrameStreamOptions {
  maxFrameBytes: number
  /** One line for the operator (stderr in `dsh acp`): what was dropped and why. */
  report(line: string): void
}

export interface FrameStream extends Stream {
  /** Why reading ended: `end of input` on EOF, else the read error. Set once the input is done. */
  readonly ended: Promise<string>
}

/** Serve frames read from `input`, writing frames (and error answers) to `output`. */
export function frameStream(input: Readable, output: Writable, options: FrameStreamOptions): FrameStream {
  const { maxFrameBytes, report } = options
  let writing: Promise<void> = Promise.resolve()
  const writeFrame = (message: unknown): Promise<void> => {
    const text = `${JSON.stringify(message)}\n`
    const write = writing.then(
      () =>
        new Promise<void>((resolve, reject) => {
          output.write(text, (error) => (error ? reject(error) : resolve()))
        }),
    )
    // A failed write fails its own sender; the queue itself goes on.
    writing = write.catch(() => {})
    return write
  }
  const answerError = (id: string | number | null, code: number, message: string, data?: unknown): void => {
    writeFrame({ jsonrpc: '2.0', id, error: { code, message, ...(data !== undefined && { data }) } }).catch((error: unknown) => {
      report(`could not answer a malformed frame: ${String(error)}`)
    })
  }

  let endReason!: (reason: string) => void
  const ended = new Promise<string>((resolve) => (endReason = resolve))
  let stopped = false

  const readable = new ReadableStream<AnyMessage>({
    start: (controller) => {
      let pending: Buffer[] = []
      let pendingBytes = 0
      /** Set while dropping an oversized frame: its kept head and its length so far. */
      let oversized: { head: Buffer; bytes: number } | undefined

      const takeLine = (line: Buffer): void => {
        const text = line.toString('utf8').trim()
        if (!text) return
        let message: unknown
        try {
          message = JSON.parse(text)
        } catch {
          answerError(null, PARSE_ERROR, 'Parse error: the line is not valid JSON; send one JSON-RPC message per line')
          return
        }
        if (Array.isArray(message)) answerError(null, INVALID_REQUEST, 'Invalid Request: JSON-RPC batches are not supported by ACP; send one message per line')
        else if (!isRecord(message)) answerError(null, INVALID_REQUEST, 'Invalid Request: a JSON-RPC message must be an object')
        else controller.enqueue(message as AnyMessage)
      }

      const dropOversized = ({ head, bytes }: { head: Buffer; bytes: number }): void => {
        const fields = readTopLevelFields(head.toString('utf8'))
        const limit = `the ${maxFrameBytes}-byte frame limit (dsh acp --max-frame-bytes)`
        const what = `a frame of ${bytes} bytes over ${limit}`
        if (fields.id === undefined) {
          report(`dropped ${what}; no request id could be read from its first ${HEAD_BYTES} bytes, so it is not answered`)
          return
        }
        const error = { code: INVALID_REQUEST, message: `Invalid Request: ${what} was dropped; send smaller messages or raise the limit`, data: { frameBytes: bytes, maxFrameBytes } }
        if (fields.keys.has('method') || !(fields.keys.has('result') || fields.keys.has('error'))) {
          report(`dropped ${what} (id ${JSON.stringify(fields.id)}); answered with an error`)
          answerError(fields.id, error.code, error.message, error.data)
        } else {
          // A response of the client's to one of our requests: that request fails with the reason.
          report(`dropped ${what} (a response, id ${JSON.stringify(fields.id)}); the request it answered fails`)
          controller.enqueue({ jsonrpc: '2.0', id: fields.id, error } as AnyMessage)
        }
      }

      const push = (chunk: Buffer): void => {
        let start = 0
        while (start <= chunk.length) {
          const newline = chunk.indexOf(NEWLINE, start)
          const end = newline === -1 ? chunk.length : newline
          const piece = chunk.subarray(start, end)
          if (oversized) {
            oversized.bytes += piece.length
          } else if (pendingBytes + piece.length > maxFrameBytes) {
            const head = Buffer.concat([...pending, piece.subarray(0, HEAD_BYTES)]).subarray(0, HEAD_BYTES)
            oversized = { head: Buffer.from(head), bytes: pendingBytes + piece.length }
            pending = []
            pendingBytes = 0
          } else if (piece.length > 0) {
            // Copied: the stream may reuse the chunk's memory.
            pending.push(Buffer.from(piece))
            pendingBytes += piece.length
          }
          if (newline === -1) return
          if (oversized) {
            dropOversized(oversized)
            oversized = undefined
          } else {
            const line = pending.length === 1 ? pending[0] : Buffer.concat(pending)
            pending = []
            pendingBytes = 0
            takeLine(line)
          }
          start = newline + 1
        }
      }

      input.on('data', (chunk: Buffer | string) => {
        if (!stopped) push(typeof chunk === 'string' ? Buffer.from(chunk) : chunk)
      })
      input.once('end', () => {
        if (stopped) return
        stopped = true
        if (oversized) dropOversized(oversized)
        else if (pendingBytes > 0) takeLine(Buffer.concat(pending))
        endReason('end of input')
        controller.close()
      })
      input.once('error', (error) => {
        if (stopped) return
        stopped = true
        endReason(`reading input failed: ${error.message}`)
        controller.error(error)
      })
    },
    cancel: () => {
      stopped = true
      endReason('the connection was closed')
      input.pause()
    },
  })

  const writable = new WritableStream<AnyMessage>({ write: (message) => writeFrame(message) })
  return { readable, writable, ended }
}
