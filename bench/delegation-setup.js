// What the delegation benchmarks share: a parent harness with the providers a scenario
// measures, one timed delegation through one of them, and long-lived dsh processes (workers)
// started for a scenario and stopped at its end.
import { spawn } from 'node:child_process'
import { mkdtempSync } from 'node:fs'
import { dirname, join } from 'node:path'
import { fileURLToPath } from 'node:url'
import { createHarness } from '@dsh/testkit/harness'
import { text } from '@dsh/llm'
import { SubagentService } from '@dsh/subagent'

export const dshMain = join(dirname(fileURLToPath(import.meta.url)), '../packages/cli/dsh/dist/main.js')

/** A parent agent in a harness with `plugins` ([plugin, config] pairs) loaded. */
export async function parentWith(plugins) {
  const harness = await createHarness({ script: [{ reply: [{ text: 'unused' }] }] })
  await harness.plugin(SubagentService)
  for (const [plugin, config] of plugins) await harness.plugin(plugin, config)
  return { harness, parent: await harness.agent() }
}

/** One delegation through `provider`, to its end and disposal; anything but `completed` throws. */
export async function delegate({ harness, parent }, provider, prompt) {
  const run = await harness.ctx.subagents.start(provider, { prompt: [text(prompt)], parent, signal: new AbortController().signal })
  const result = await run.result
  await run.dispose()
  if (result.stopReason !== 'completed') throw new Error(`${provider} run ended ${result.stopReason}: ${result.diagnostic}`)
}

/** Long-lived dsh processes of one scenario, each with its own session directory under `scratch`. */
export class DshProcesses {
  constructor(scratch) {
    this.scratch = scratch
    this.children = []
  }

  /** `dsh ARGS…`; resolves with the first line it prints on stdout (a URL, "taking jobs…"). */
  start(args) {
    const child = spawn(process.execPath, [dshMain, ...args, '--session-dir', mkdtempSync(join(this.scratch, 'sessions-'))], { env: { ...process.env, DSH_HOME: this.scratch }, stdio: ['ignore', 'pipe', 'pipe'] })
    this.children.push(child)
    return new Promise((resolve, reject) => {
      let out = ''
      let err = ''
      child.stdout.on('data', (chunk) => {
        out += chunk
        if (out.includes('\n')) resolve(out.trim())
      })
      child.stderr.on('data', (chunk) => (err += chunk))
      child.on('exit', (code) => reject(new Error(`dsh ${args[0]} exited ${code}: ${err}`)))
    })
  }

  /** SIGTERM each, and wait until all have exited. */
  stop() {
    return Promise.all(this.children.map((child) => new Promise((resolve) => (child.exitCode !== null ? resolve() : (child.once('exit', resolve), child.kill('SIGTERM'))))))
  }
}
