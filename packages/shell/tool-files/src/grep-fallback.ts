import { FileToolError } from './errors.js'
import type { GrepJob } from './grep-job.js'

/**
 * The search without ripgrep: JavaScript regular expressions over every file, in a worker
 * thread, so that a pattern that backtracks for ever (`(a+)+$` on a long line of `a`s)
 * stops when its time is up: `worker.terminate()` interrupts it mid-match, which a timer
 * on this thread never could. The cost: a thread started per call (tens of milliseconds)
 * and a walk and a match in JavaScript (see the README's figures).
 *
 * The worker's code is this string, not a file beside the module, so the bundled CLI (one
 * file) needs nothing on disk; it imports what it uses, so it runs whether Node evaluates
 * it as CommonJS or (under `--input-type=module`, which a worker inherits) as a module. It mirrors ripgrep's output (`path:line:text`, `path-line-text`
 * for context, `--` between groups; `path` / `path:count` in the other modes) and order
 * (each directory's entries by name), so the model reads one format whichever searched.
 */
const WORKER_SOURCE = String.raw`
(async () => {
const { parentPort, workerData: job } = await import('node:worker_threads')
const fs = await import('node:fs')
const path = await import('node:path')
const regexp = new RegExp(job.regex, job.ignoreCase ? 'i' : '')
const filters = job.globs.map((glob) => new RegExp(glob.regexp))
const namedOnly = job.globs.map((glob) => glob.nameOnly)
let out = ''
let full = false
let unreadable = 0
let visited = 0
let walkStopped = false
const cut = (line) => (line.length <= job.maxLineChars ? line : line.slice(0, job.maxLineChars) + '\u2026 (line cut at ' + job.maxLineChars + ' characters)')
function emit(text) {
  if (out.length + text.length + 1 > job.maxOutputChars) { full = true; return }
  out += text + '\n'
}
function wanted(relative, name) {
  if (job.extensions && !job.extensions.some((ext) => name.endsWith(ext))) return false
  for (let i = 0; i < filters.length; i++) if (!filters[i].test(namedOnly[i] ? name : relative)) return false
  return true
}
function search(file, shown) {
  let bytes
  try {
    const stat = fs.statSync(file)
    if (!stat.isFile() || stat.size > job.maxFileBytes) return
    bytes = fs.readFileSync(file)
  } catch { unreadable++; return }
  if (bytes.subarray(0, 8192).includes(0)) return
  const lines = bytes.toString('utf8').split('\n')
  if (lines[lines.length - 1] === '') lines.pop()
  let count = 0
  let lastShown = -1
  let pendingAfter = 0
  for (let i = 0; i < lines.length && !full; i++) {
    if (regexp.test(lines[i])) {
      count++
      if (job.mode === 'files_with_matches') break
      if (job.mode !== 'content') continue
      const from = Math.max(lastShown + 1, i - job.before)
      if (lastShown !== -1 && from > lastShown + 1) emit('--')
      else if (lastShown === -1 && job.anyShown && (job.before > 0 || job.after > 0)) emit('--')
      for (let j = from; j < i; j++) emit(shown + '-' + (j + 1) + '-' + cut(lines[j]))
      emit(shown + ':' + (i + 1) + ':' + cut(lines[i]))
      lastShown = i
      pendingAfter = job.after
    } else if (pendingAfter > 0 && job.mode === 'content') {
      emit(shown + '-' + (i + 1) + '-' + cut(lines[i]))
      lastShown = i
      pendingAfter--
    }
  }
  if (count === 0) return
  job.anyShown = true
  if (job.mode === 'files_with_matches') emit(shown)
  else if (job.mode === 'count') emit(shown + ':' + count)
}
function walk(dir, relative) {
  let entries
  try { entries = fs.readdirSync(dir, { withFileTypes: true }) } catch { unreadable++; return }
  entries.sort((a, b) => (a.name < b.name ? -1 : a.name > b.name ? 1 : 0))
  for (const entry of entries) {
    if (full || walkStopped) return
    if (++visited > job.maxWalkEntries) { walkStopped = true; return }
    const rel = relative === '' ? entry.name : relative + '/' + entry.name
    const shown = job.shownPrefix + rel
    if (entry.isDirectory()) { if (!job.skip.includes(entry.name)) walk(path.join(dir, entry.name), rel); continue }
    if (!entry.isFile() || !wanted(rel, entry.name)) continue
    search(path.join(dir, entry.name), shown)
  }
}
const start = fs.statSync(job.start)
if (start.isDirectory()) walk(job.start, '')
else search(job.start, job.shownPrefix.replace(/\/$/, ''))
parentPort.postMessage({ out, full, unreadable, walkStopped })
})()
`

export interface FallbackResult {
  out: string
  full: boolean
  unreadable: number
  walkStopped: boolean
}

/** Run `job` in a worker thread, stopped (and refused) when `timeoutMs` passes or `signal` aborts. */
export function grepInWorker(job: GrepJob, timeoutMs: number, signal: AbortSignal): Promise<FallbackResult> {
  // Checked here, where a bad pattern is one clear line, not a worker's crash.
  try {
    new RegExp(job.regex, job.ignoreCase ? 'i' : '')
  } catch (error) {
    return Promise.reject(new FileToolError('BAD_PATTERN', `the regular expression ${JSON.stringify(job.regex)} is not valid: ${(error as Error).message}`))
  }
  return new Promise((resolve, reject) => {
    // node:worker_threads is loaded here, on the first search without ripgrep, not when the
    // file tools load: every dsh start composes them, and most never need the fallback.
    const { Worker } = process.getBuiltinModule('node:worker_threads')
    const worker = new Worker(WORKER_SOURCE, { eval: true, workerData: job })
    let settled = false
    const finish = (outcome: () => void) => {
      if (settled) return
      settled = true
      clearTimeout(timer)
      signal.removeEventListener('abort', onAbort)
      void worker.terminate()
      outcome()
    }
    const timer = setTimeout(
      () =>
        finish(() =>
          reject(
            new FileToolError(
              'TIMED_OUT',
              `the search was stopped after ${timeoutMs}ms: the regular expression ${JSON.stringify(job.regex)} took too long (nested repetition such as (a+)+ can take exponential time on some lines); simplify it or search a narrower path`,
            ),
          ),
        ),
      timeoutMs,
    )
    const onAbort = () => finish(() => reject(new FileToolError('TIMED_OUT', 'the search was cancelled')))
    signal.addEventListener('abort', onAbort, { once: true })
    worker.once('message', (result: FallbackResult) => finish(() => resolve(result)))
    worker.once('error', (error) => finish(() => reject(new FileToolError('UNREADABLE', `the search failed: ${error.message}`))))
    worker.once('exit', (code) => finish(() => reject(new FileToolError('UNREADABLE', `the search ended without a result (exit code ${code})`))))
  })
}
