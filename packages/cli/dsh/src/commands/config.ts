import { discoverConfig } from '../config-file.js'
import { startRuntime, unboundSubagentTools } from '../runtime.js'

/** `dsh config check`: compose everything, print the plugin list, or the first error. */
export async function configCheck(options: { config?: string; model?: string; sessionDir?: string }): Promise<number> {
  const file = options.config ?? discoverConfig()
  let runtime
  try {
    runtime = await startRuntime(options)
  } catch (error) {
    process.stderr.write(`dsh: config ${file ?? '(defaults only)'} is not valid:\n  ${error instanceof Error ? error.message : String(error)}\n`)
    return 1
  }
  try {
    const unbound = unboundSubagentTools(runtime)
    // A default model naming an adapter that is not loaded would fail every turn.
    if (runtime.ctx.llm.config.model) {
      try {
        runtime.ctx.llm.resolve()
      } catch (error) {
        unbound.push(error instanceof Error ? error.message : String(error))
      }
    }
    if (unbound.length > 0) {
      process.stderr.write(`dsh: config ${file ?? '(defaults only)'} is not valid:\n  ${unbound.join('\n  ')}\n`)
      return 1
    }
    process.stdout.write(`config: ${file ?? '(defaults only)'}\n`)
    const width = Math.max(...runtime.entries.map((entry) => entry.id.length))
    for (const entry of runtime.entries) {
      const config = entry.config && Object.keys(entry.config).length > 0 ? `  ${JSON.stringify(entry.config)}` : ''
      process.stdout.write(`  ${entry.id.padEnd(width)}  ${entry.name}${config}\n`)
    }
    const { ctx } = runtime
    process.stdout.write(`ok: ${runtime.entries.length} plugins; models: ${ctx.llm.list().join(', ')}; subagent providers: ${ctx.get('subagents')?.list().join(', ') || 'none'}; tools: ${ctx.tools.list().join(', ')}\n`)
    return 0
  } finally {
    await runtime.dispose()
  }
}
