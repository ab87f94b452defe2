/**
 * Whether definitions can run in a composition, decided before anything starts: each
 * problem is one line naming the file and the line of the field at fault. The caller
 * describes the composition (registered providers and what they lack, the tools that
 * exist, how a model spec resolves); this file knows only definitions.
 */
import { isToolPattern } from '@dsh/base'
import { fromProject } from './parse.js'
import type { AgentDefinition, DefinitionField } from './types.js'

/**
 * The start-time features a definition asks of its provider, in the shape of the requests
 * it will make (`@dsh/subagent`'s `RequestedFeatures`).
 */
export interface DefinitionFeatures {
  toolFilter?: unknown
  maxDepth?: number
  workspace?: 'shared' | 'worktree' | 'copy'
  sandbox?: boolean | 'no-network'
}

/** What a definition needs of its provider. */
export interface ProviderFacts {
  /**
   * The first of `features` the provider cannot give its child, or undefined. The host
   * answers with `@dsh/subagent`'s one capability check (`firstUnsupportedFeature` over the
   * provider's capabilities), the check that refuses the requests themselves: a definition
   * is refused here exactly when its requests would be.
   */
  lacks(features: DefinitionFeatures): string | undefined
  /** Whether it can keep a child across turns (`prepareContinuable`). */
  continuable: boolean
  /**
   * Whether its child runs in this process on one of our adapters (spawn, fork): then a
   * definition's `model` is resolved here. Any other provider decides on a model itself
   * (and may refuse one at start, as ACP does).
   */
  modelsHere: boolean
}

export interface CompositionFacts {
  /** The provider registered under `name`, or undefined. */
  provider(name: string): ProviderFacts | undefined
  /** Every registered provider's name, for the message. */
  providers: readonly string[]
  /** Every tool a child could be given. */
  tools: readonly string[]
  /** Why `spec` is not a usable model (unknown adapter, a missing script), or undefined. */
  modelProblem(spec: string): string | undefined
  /** Whether an approval broker (`@dsh/approvals`) enforces permission rules in this composition. */
  approvals: boolean
  /** Whether model calls can be priced (`ctx.llm`'s prices table has entries): a cost budget needs it. */
  prices?: boolean
  /** Why commands cannot be confined here (bubblewrap missing), or undefined: a `sandbox` needs it. */
  sandboxProblem?: string
  /** Whether `ctx.workspaces` is composed: a `workspace` other than shared needs it. */
  workspaces?: boolean
  /**
   * Whether `spec` names a model whose answers are files (a script, a recording) rather
   * than a model service. Absent: a spec on the shipped adapters' names, `scripted` or `replay`.
   */
  playbackModel?(spec: string): boolean
  /** Whether the user's config lets a project's definitions name such a model (the service's `projectScriptedModels`). */
  projectScriptedModels?: boolean
  /** The names of the skills loaded (`@dsh/skills`); absent: no skills service, so a definition's `skills` cannot apply. */
  skills?: readonly string[]
}

/** The shipped adapters whose answers are files: a script (`@dsh/llm-scripted`), a recording (`@dsh/llm-replay`). */
const PLAYBACK_ADAPTERS = ['scripted', 'replay']

function namesPlaybackAdapter(spec: string): boolean {
  const colon = spec.indexOf(':')
  return PLAYBACK_ADAPTERS.includes(colon < 0 ? spec : spec.slice(0, colon))
}

/** Every problem of `definitions` in this composition, one line each (empty: all can run). */
export function definitionProblems(definitions: readonly AgentDefinition[], facts: CompositionFacts): string[] {
  const problems: string[] = []
  for (const definition of definitions) {
    const at = (field: DefinitionField) => `${definition.source.file}:${definition.source.lines[field] ?? 1}: helper "${definition.name}"`
    const provider = facts.provider(definition.provider)
    if (!provider) {
      problems.push(`${at('provider')}: no subagent provider named "${definition.provider}" is registered (registered: ${facts.providers.join(', ') || 'none'}); load its plugin or fix the name`)
      continue
    }
    if ((definition.tools !== undefined || definition.disallowedTools !== undefined) && provider.lacks({ toolFilter: true }) !== undefined) {
      const field = definition.tools !== undefined ? 'tools' : 'disallowedTools'
      problems.push(`${at(field)}: provider "${definition.provider}" cannot enforce a tool list (its child's tools are its own); remove ${field} or use spawn or fork`)
    } else {
      for (const field of ['tools', 'disallowedTools'] as const) {
        // A pattern (mcp__github__*) is never unknown: the tools it means may be absent, as a server's that did not start.
        const unknown = (definition[field] ?? []).filter((name) => !isToolPattern(name) && !facts.tools.includes(name))
        if (unknown.length > 0) problems.push(`${at(field)}: unknown tool${unknown.length > 1 ? 's' : ''} ${unknown.map((name) => `"${name}"`).join(', ')} in ${field} (tools: ${facts.tools.join(', ')})`)
      }
    }
    if (definition.maxDepth !== undefined && provider.lacks({ maxDepth: definition.maxDepth }) !== undefined) {
      problems.push(`${at('maxDepth')}: provider "${definition.provider}" cannot enforce a depth limit; remove maxDepth or use a provider that can`)
    }
    if (definition.continuable && !provider.continuable) {
      problems.push(`${at('continuable')}: provider "${definition.provider}" cannot keep a child across turns; remove continuable or use spawn or fork`)
    }
    if (definition.workspace !== undefined && definition.workspace !== 'shared') {
      if (provider.lacks({ workspace: definition.workspace }) !== undefined) problems.push(`${at('workspace')}: provider "${definition.provider}" cannot give its child a directory of its own (its children work on another host); use workspace: shared or a provider that can (spawn, fork, acp, codex, claude-code)`)
      else if (facts.workspaces === false) problems.push(`${at('workspace')}: workspace ${definition.workspace} needs the workspace service, and this composition has none (- id: workspaces, name: "@dsh/workspaces")`)
    }
    if (definition.sandbox !== undefined && definition.sandbox !== false) {
      if (provider.lacks({ sandbox: definition.sandbox }) !== undefined) problems.push(`${at('sandbox')}: provider "${definition.provider}" cannot confine its child's commands (only in-process children can: spawn, fork)`)
      else if (facts.sandboxProblem !== undefined) problems.push(`${at('sandbox')}: ${facts.sandboxProblem}`)
    }
    if (definition.budget?.cost !== undefined && facts.prices === false) {
      problems.push(`${at('maxCost')}: maxCost needs a price table: set prices in the llm service's config (model spec → { input, output } per million tokens), or remove maxCost`)
    }
    if (definition.skills !== undefined) {
      const unknown = definition.skills.filter((name) => !(facts.skills ?? []).includes(name))
      // The list is shown to the child in this process's prompt: a remote child composes its own.
      if (!provider.modelsHere) problems.push(`${at('skills')}: provider "${definition.provider}" makes its child's prompt itself, so skills cannot limit it; remove skills or use spawn or fork`)
      else if (facts.skills === undefined) problems.push(`${at('skills')}: skills needs the skills service, and this composition has none (- id: skills, name: "@dsh/skills"); add it, or remove skills`)
      else if (unknown.length > 0) problems.push(`${at('skills')}: unknown skill${unknown.length > 1 ? 's' : ''} ${unknown.map((name) => `"${name}"`).join(', ')} in skills (skills: ${facts.skills.join(', ') || 'none'})`)
    }
    // A continuable child of another program is started without the request's servers (its start carries no mcpServers yet).
    if (definition.mcpServers !== undefined && definition.mcpServers.length > 0 && definition.continuable && !provider.modelsHere) {
      problems.push(`${at('mcpServers')}: a continuable helper of provider "${definition.provider}" does not get its mcpServers yet (a one-shot one does); remove continuable or mcpServers, or use spawn or fork`)
    }
    if (definition.permissions !== undefined && !facts.approvals) {
      problems.push(`${at('permissions')}: permissions need the approval broker, and this composition has none (- id: approvals, name: "@dsh/approvals"); add it, or remove permissions`)
    }
    // A project's file that picks a script or a recording makes the project's author the
    // model: refused whatever the provider (a worker would play the same files), unless the user said so.
    if (definition.model !== undefined && fromProject(definition.source.origin) && facts.projectScriptedModels !== true && (facts.playbackModel ?? namesPlaybackAdapter)(definition.model)) {
      problems.push(
        `${at('model')}: model ${JSON.stringify(definition.model)} plays back files, and a project's definition may not choose one (the project's author would be the model); to allow it, set projectScriptedModels: true in the agent-definitions entry of your own config (- id: agent-definitions, name: "@dsh/agent-definitions", config: { projectScriptedModels: true }), or move the file to ~/.dsh/agents`,
      )
    } else if (definition.model !== undefined && provider.modelsHere) {
      const problem = facts.modelProblem(definition.model)
      if (problem !== undefined) problems.push(`${at('model')}: model "${definition.model}": ${problem}`)
    }
  }
  return problems
}
