/**
 * Agent definitions in a composition: when to load `@dsh/agent-definitions` (only when a
 * definitions directory exists or the config names the plugin, so a composition without
 * helpers loads nothing of it), turning the default subagent tool into the helper tool,
 * and the checks that run before any session exists.
 */
import { readdirSync } from 'node:fs'
import { join } from 'node:path'
import type { Context } from 'cordis'
import type {} from '@dsh/agent-definitions'
import type {} from '@dsh/tools'
import type {} from '@dsh/skills'
import { oneLineMessage } from './errors.js'
import type { PluginEntry } from './config-entries.js'
import { dshHome } from './config-file.js'

export const DEFINITIONS_PLUGIN = '@dsh/agent-definitions'
/** The default entry's id: a user entry with this id (or naming the plugin) configures it. */
export const DEFINITIONS_ENTRY_ID = 'agent-definitions'

/**
 * `entries` with the definitions plugin when it is wanted: named by the config, or a
 * `./.dsh/agents` or `$DSH_HOME/agents` directory holds a definition (`discover` false: the demo,
 * which must not depend on the machine). With it, the default `tool-subagent` entry offers
 * the helpers beside its general child, unless the user's entry for it says `helpers` itself.
 */
export function withAgentDefinitions(entries: PluginEntry[], user: readonly PluginEntry[], discover: boolean, cwd = process.cwd()): PluginEntry[] {
  let named = entries.some((entry) => entry.name === DEFINITIONS_PLUGIN)
  if (!named && discover && (holdsDefinitions(join(cwd, '.dsh', 'agents')) || holdsDefinitions(join(dshHome(), 'agents')))) {
    entries = [...entries, { id: DEFINITIONS_ENTRY_ID, name: DEFINITIONS_PLUGIN }]
    named = true
  }
  if (!named) return entries
  const userSaysHelpers = user.some((entry) => entry.id === 'tool-subagent' && entry.config !== undefined && 'helpers' in entry.config)
  if (userSaysHelpers) return entries
  // Its provider stays: the general child beside the helpers runs on it (helpersOnly: true drops that child).
  return entries.map((entry) => (entry.id !== 'tool-subagent' || entry.name !== '@dsh/tool-subagent' ? entry : { ...entry, config: { ...entry.config, helpers: true } }))
}

/**
 * Whether `dir` has a `*.md` file: an empty (or absent) agents directory changes nothing,
 * so the plain subagent tool stays. One directory read; the files are parsed by the plugin.
 */
function holdsDefinitions(dir: string): boolean {
  try {
    return readdirSync(dir).some((name) => name.endsWith('.md'))
  } catch (error) {
    // Absent is the common case; anything else (a file where the directory should be, a
    // symlink loop, no permission) is the plugin's to report, naming the directory.
    return (error as NodeJS.ErrnoException).code !== 'ENOENT'
  }
}

/**
 * Every problem of the loaded definitions in this composition, one line each `FILE:LINE:
 * …` (see `definitionProblems`); empty without the plugin. Model specs are resolved here,
 * as `dsh run` would resolve them (a script file must exist).
 */
export async function definitionReadiness(ctx: Context): Promise<string[]> {
  const definitions = ctx.get('agentDefinitions')
  if (!definitions) return []
  const [{ definitionProblems, fromProject }, { firstUnsupportedFeature }] = await Promise.all([import('@dsh/agent-definitions'), import('@dsh/subagent')])
  const subagents = ctx.get('subagents')
  const models = new Map<string, string | undefined>()
  for (const definition of definitions.list()) {
    if (definition.model === undefined || models.has(definition.model)) continue
    try {
      const { adapter, model } = ctx.llm.resolve(definition.model)
      await adapter.prepare?.(model)
      models.set(definition.model, undefined)
    } catch (error) {
      models.set(definition.model, oneLineMessage(error))
    }
  }
  return definitionProblems(definitions.list(), {
    provider: (name) => {
      const provider = subagents?.getProvider(name)
      if (!provider) return undefined
      // A provider whose children are agents of this process (spawn, fork) resolves their model here; a queue worker resolves its own.
      // What a definition asks is checked by the one capability check its requests meet at admission.
      return { lacks: (features) => firstUnsupportedFeature(features, provider.capabilities), continuable: provider.prepareContinuable !== undefined, modelsHere: provider.inProcess === true }
    },
    providers: subagents?.list() ?? [],
    tools: ctx.tools.list(),
    modelProblem: (spec) => models.get(spec),
    approvals: ctx.get('approvals') !== undefined,
    prices: Object.keys(ctx.llm.prices ?? {}).length > 0,
    workspaces: ctx.get('workspaces') !== undefined,
    // The adapters whose answers are files, by what they are: a renamed one too.
    ...(definitions.list().some((definition) => definition.model !== undefined && fromProject(definition.source.origin)) && { playbackModel: await playbackModelOf(ctx) }),
    projectScriptedModels: definitions.projectScriptedModels,
    // A helper's skills: names the skills service loaded (absent without the service).
    ...(ctx.get('skills') && { skills: ctx.get('skills')!.list().map((skill) => skill.name) }),
    // Checked only when a helper asks for it: finding out runs one real sandbox.
    ...(definitions.list().some((definition) => definition.sandbox !== undefined && definition.sandbox !== false) && { sandboxProblem: sandboxProblemOf(ctx) }),
  })
}

/**
 * Whether a model spec's answers are files, a script or a recording (see `CompositionFacts.playbackModel`):
 * its adapter here is the scripted or the replay adapter, whatever its name, or the spec names
 * one of theirs by the shipped name (an adapter not loaded here, as a queue worker's, may be one).
 */
async function playbackModelOf(ctx: Context): Promise<(spec: string) => boolean> {
  const [{ ScriptedAdapter }, { isReplayAdapter }] = await Promise.all([import('@dsh/llm-scripted'), import('@dsh/llm-replay')])
  return (spec) => {
    const colon = spec.indexOf(':')
    const name = colon < 0 ? spec : spec.slice(0, colon)
    const adapter = ctx.llm.getAdapter(name)
    return name === 'scripted' || name === 'replay' || adapter instanceof ScriptedAdapter || isReplayAdapter(adapter)
  }
}

/** Why commands cannot be confined in this composition, or undefined (`@dsh/bash`'s own check). */
export function sandboxProblemOf(ctx: Context): string | undefined {
  const bash = ctx.get('bash')
  if (!bash) return 'sandbox needs the bash service (- id: bash, name: "@dsh/bash"), which this composition has not got'
  return bash.sandboxProblem()
}
