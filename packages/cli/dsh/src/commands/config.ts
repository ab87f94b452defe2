import { printable } from '@dsh/base'
import type {} from '@dsh/agent-definitions'
import { checkEntries, entriesAsWritten, parseEntries } from '../compose.js'
import { chooseConfig, chosenFile, type ConfigChoice } from '../config-file.js'
import { defaultEntries } from '../defaults.js'
import { CompositionError, oneLineMessage } from '../errors.js'
import { startRuntime } from '../runtime.js'
import { shippedPlugins } from '../shipped-plugins.js'

/**
 * `dsh config check`: compose everything and print the plugin list. A configuration
 * error is thrown, so it is reported exactly as `dsh run` reports it (one line, exit 2).
 * `prompt`: then print the composed system prompts of a root agent and of a child.
 */
export async function configCheck(options: { config?: string; model?: string; sessionDir?: string; prompt?: boolean; verbose?: boolean }): Promise<number> {
  const choice = chooseConfig(options)
  if (choice.kind === 'untrusted') return checkUntrusted(choice, options)
  const file = chosenFile(choice)
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

/**
 * A ./dsh.yml the user has not trusted: say so as every command does (exit 2), after
 * checking what can be checked without running any of its code, so the user can read
 * what they are about to trust. Entries naming a shipped plugin are checked as written
 * (keys and values); a plugin by path or an installed package is not loaded, since
 * loading it runs it.
 */
async function checkUntrusted(choice: Extract<ConfigChoice, { kind: 'untrusted' }>, options: { model?: string; sessionDir?: string }): Promise<never> {
  process.stdout.write(`config: ${choice.file} (not trusted, so not used)\n`)
  try {
    const written = entriesAsWritten(defaultEntries(options), parseEntries(choice.text, choice.file))
    await checkEntries(written.filter((entry) => Object.hasOwn(shippedPlugins, entry.name)))
    const unloaded = written.filter((entry) => !Object.hasOwn(shippedPlugins, entry.name))
    process.stdout.write(`contents: ${written.length} entries, their keys and values ok as written${unloaded.length > 0 ? `; not loaded (its code would run): ${unloaded.map((entry) => `${entry.name} (entry "${entry.id}")`).join(', ')}` : ''}\n`)
  } catch (error) {
    // The same words a run would use for it, on the report: the refusal stays the one line on stderr.
    process.stdout.write(printable(`contents: ${oneLineMessage(error)}\n`))
  }
  throw new CompositionError('CONFIG_UNTRUSTED', choice.refusal)
}
