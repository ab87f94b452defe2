import { printable } from '@dsh/base'
import type {} from '@dsh/agent-definitions'
import { discoverConfig } from '../config-file.js'
import { startRuntime } from '../runtime.js'

/**
 * `dsh config check`: compose everything and print the plugin list. A configuration
 * error is thrown, so it is reported exactly as `dsh run` reports it (one line, exit 2).
 * `prompt`: then print the composed system prompts of a root agent and of a child.
 */
export async function configCheck(options: { config?: string; model?: string; sessionDir?: string; prompt?: boolean; verbose?: boolean }): Promise<number> {
  const file = options.config ?? discoverConfig()
  // A composition error propagates: `dsh run` reports the same one the same way (exit 2).
  const runtime = await startRuntime({ ...options, checkReady: true })
  try {
    process.stdout.write(`config: ${file ?? '(defaults only)'}\n`)
    const width = Math.max(...runtime.entries.map((entry) => entry.id.length))
    for (const entry of runtime.entries) {
      const config = entry.config && Object.keys(entry.config).length > 0 ? `  ${JSON.stringify(entry.config)}` : ''
      process.stdout.write(`  ${entry.id.padEnd(width)}  ${entry.name}${config}\n`)
    }
    const { ctx } = runtime
    process.stdout.write(`ok: ${runtime.entries.length} plugins; models: ${ctx.llm.list().join(', ')}; subagent providers: ${ctx.get('subagents')?.list().join(', ') || 'none'}; tools: ${ctx.tools.list().join(', ')}\n`)
    const definitions = ctx.get('agentDefinitions')
    if (definitions) {
      const helpers = definitions.list().map((definition) => `${definition.name} (${definition.provider})`)
      process.stdout.write(printable(`helpers: ${helpers.join(', ') || 'none'}\n${definitions.notes.map((note) => `${note}\n`).join('')}`))
    }
  } finally {
    await runtime.dispose()
  }
  // Imported when asked for: `dsh agents` shares it, and a module both graphs import would run on every start.
  if (options.prompt) process.stdout.write(`\n${await (await import('./prompt-preview.js')).previewPrompts((sessionDir) => startRuntime({ ...options, sessionDir }))}`)
  return 0
}
