import { DshError } from '@dsh/base'

/** The error an aborted request ends with; the agent loop recognises it by its name (`AbortError`). */
export class AbortError extends DshError<'ABORTED'> {
  constructor(options?: { cause?: unknown }) {
    super('ABORTED', 'the model request was aborted', options)
  }
}

export function throwIfAborted(signal: AbortSignal): void {
  if (signal.aborted) throw new AbortError({ cause: signal.reason })
}

/** Wait `ms`, or reject with `AbortError` as soon as `signal` aborts. */
export function abortableDelay(ms: number, signal: AbortSignal): Promise<void> {
  return new Promise((resolve, reject) => {
    if (signal.aborted) return reject(new AbortError({ cause: signal.reason }))
    const onAbort = () => {
      clearTimeout(timer)
      reject(new AbortError({ cause: signal.reason }))
    }
    const timer = setTimeout(() => {
      signal.removeEventListener('abort', onAbort)
      resolve()
    }, ms)
    signal.addEventListener('abort', onAbort, { once: true })
  })
}
