// File-tool benchmark scenarios in a fresh process, like scenario.js: prints one JSON object.
//   filesGrep N   grep over a generated tree of N files (N/100 directories of 100 files of
//                 20 lines; one line in 50 files holds the needle): ripgrep run directly with
//                 the tool's own flags, the grep tool on ripgrep, and the grep tool's built-in
//                 search (a worker thread), interleaved in one sitting; each must find the
//                 same files. The tree is made once per N under the temp directory and kept
//                 (dsh-bench-files-N), since making 50,000 files costs more than the searches.
//   filesRead N   N read calls of a 200-line file through the tool registry (schema check
//                 and all, as the turn loop calls a tool): CPU and wall per call.
import { execFileSync } from 'node:child_process'
import { existsSync, mkdirSync, rmSync, writeFileSync } from 'node:fs'
import { cpus, loadavg, tmpdir } from 'node:os'
import { join } from 'node:path'
import { createHarness } from '@dsh/testkit/harness'
import { FilesToolPlugin, ripgrepOnPath } from '@dsh/tool-files'

const [name, arg] = process.argv.slice(2)

function cpuMicros() {
  const { user, system } = process.cpuUsage()
  return user + system
}

const median = (values) => {
  const sorted = [...values].sort((a, b) => a - b)
  const mid = sorted.length >> 1
  return sorted.length % 2 ? sorted[mid] : (sorted[mid - 1] + sorted[mid]) / 2
}

/** The generated tree of `count` files, made once and reused by later processes. */
function tree(count) {
  const root = join(tmpdir(), `dsh-bench-files-${count}`)
  const done = join(root, '.complete')
  if (existsSync(done)) return root
  rmSync(root, { recursive: true, force: true })
  const lines = Array.from({ length: 20 }, (_, i) => `export const value${i} = compute(${i}, "some text to search through") // line ${i}`)
  for (let file = 0; file < count; file++) {
    const dir = join(root, `pkg${String(Math.floor(file / 100)).padStart(4, '0')}`)
    if (file % 100 === 0) mkdirSync(dir, { recursive: true })
    const body = file % 1000 === 7 ? [...lines.slice(0, 10), 'const marker = "the-needle-we-look-for"', ...lines.slice(10)] : lines
    writeFileSync(join(dir, `file${String(file % 100).padStart(3, '0')}.ts`), `${body.join('\n')}\n`)
  }
  writeFileSync(done, '')
  return root
}

/** One tool's `execute`, called as the registry calls it, for an agent working in `cwd`. */
async function toolsIn(cwd, config) {
  const harness = await createHarness({ script: [{ reply: [{ text: 'unused' }] }] })
  await harness.plugin(FilesToolPlugin, config)
  const agent = await harness.agent({ meta: { cwd } })
  const signal = new AbortController().signal
  let id = 0
  const call = async (tool, args) => {
    const outcome = await harness.ctx.tools.execute({ type: 'tool-call', id: `c${id++}`, name: tool, args }, { agent, signal })
    const text = outcome.result.content.map((part) => part.text).join('')
    if (outcome.result.isError) throw new Error(`${tool} failed: ${text}`)
    return text
  }
  return { harness, call }
}

async function filesGrep(count) {
  const rg = ripgrepOnPath()
  if (!rg) throw new Error('filesGrep compares with ripgrep: install it (Debian: ripgrep)')
  const root = tree(count)
  const { harness: withRg, call: callRg } = await toolsIn(root, { ripgrep: true })
  const { harness: builtIn, call: callBuiltIn } = await toolsIn(root, { ripgrep: false, grepTimeoutMs: 600_000 })
  const args = { pattern: 'the-needle-we-look-for' }
  // The same search the tool asks ripgrep for (grep.ts), run directly.
  const direct = () => execFileSync(rg, ['--no-config', '--color', 'never', '--sort', 'path', '--no-ignore', '--hidden', '--no-messages', '--glob', '!.git', '--glob', '!node_modules', '--files-with-matches', '--regexp', args.pattern, '--', '.'], { cwd: root, encoding: 'utf8' }).replace(/^\.\//gm, '').trim()
  const expected = direct()
  const found = expected.split('\n').length
  if (found !== count / 1000) throw new Error(`ripgrep found ${found} files, expected ${count / 1000}`)
  // Warm: the page cache holds the tree, so every engine reads from memory.
  if ((await callRg('grep', args)) !== expected) throw new Error('the grep tool on ripgrep found other files than ripgrep')
  if ((await callBuiltIn('grep', args)) !== expected) throw new Error('the built-in search found other files than ripgrep')
  const times = { rg: [], toolRg: [], toolBuiltIn: [] }
  const load = [loadavg()[0]]
  for (let round = 0; round < 3; round++) {
    let at = performance.now()
    direct()
    times.rg.push(performance.now() - at)
    at = performance.now()
    await callRg('grep', args)
    times.toolRg.push(performance.now() - at)
    at = performance.now()
    await callBuiltIn('grep', args)
    times.toolBuiltIn.push(performance.now() - at)
  }
  load.push(loadavg()[0])
  await withRg.dispose()
  await builtIn.dispose()
  const rgMs = median(times.rg)
  return {
    [`files_grep_${count}_rg_ms`]: rgMs,
    [`files_grep_${count}_tool_rg_ms`]: median(times.toolRg),
    [`files_grep_${count}_tool_builtin_ms`]: median(times.toolBuiltIn),
    [`files_grep_${count}_tool_rg_x_rg`]: median(times.toolRg) / rgMs,
    [`files_grep_${count}_tool_builtin_x_rg`]: median(times.toolBuiltIn) / rgMs,
    files_grep_load_average: (load[0] + load[1]) / 2,
    files_grep_cores: cpus().length,
  }
}

async function filesRead(count) {
  const dir = join(tmpdir(), `dsh-bench-read-${process.pid}`)
  mkdirSync(dir, { recursive: true })
  try {
    writeFileSync(join(dir, 'file.ts'), `${Array.from({ length: 200 }, (_, i) => `export const value${i} = compute(${i}) // a line of ordinary length`).join('\n')}\n`)
    const { harness, call } = await toolsIn(dir, {})
    for (let i = 0; i < 200; i++) await call('read', { path: 'file.ts' })
    const cpu = cpuMicros()
    const wall = performance.now()
    for (let i = 0; i < count; i++) await call('read', { path: 'file.ts' })
    const figures = { files_read_call_cpu_us: (cpuMicros() - cpu) / count, files_read_call_wall_us: ((performance.now() - wall) * 1000) / count }
    await harness.dispose()
    return figures
  } finally {
    rmSync(dir, { recursive: true, force: true })
  }
}

const scenarios = { filesGrep, filesRead }
const run = scenarios[name]
if (!run) {
  console.error(`unknown scenario ${name}; known: ${Object.keys(scenarios).join(', ')}`)
  process.exit(2)
}
const figures = await run(Number(arg))
process.stdout.write(`${JSON.stringify(figures)}\n`)
