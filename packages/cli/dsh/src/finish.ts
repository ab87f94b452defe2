/**
 * How a finished command leaves. By the time a verb resolves, everything it started has
 * been awaited: its sessions written and synced, its plugins disposed, its process groups
 * stopped. A natural exit would then still tear down the whole heap, object by object
 * (about 2-3 ms of every `dsh run`), so the process exits at once instead, as soon as what
 * it wrote to stdout and stderr has left the process (a pipe may still hold buffered
 * writes: a large answer piped to a slow reader). `process.exit` still emits
 * `exit`, so the hooks that run there (the code cache's write, `@dsh/process` killing any
 * process group still alive) run as before.
 */
export async function exitWhenWritten(code: number): Promise<never> {
  process.exitCode = code
  await Promise.all([written(process.stdout), written(process.stderr)])
  process.exit(code)
}

/** Resolves once every write to `stream` so far has completed (or the stream can take no more). */
function written(stream: NodeJS.WriteStream): Promise<void> {
  return new Promise((resolvePromise) => {
    if (stream.writableLength === 0 || stream.destroyed || !stream.writable) return resolvePromise()
    // Writes complete in order: the callback of an empty one comes after all earlier ones.
    // An error (the reader went away) settles it too: there is nothing left to wait for.
    stream.write('', () => resolvePromise())
  })
}
