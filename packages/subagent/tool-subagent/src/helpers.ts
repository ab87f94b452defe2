/**
 * The delegation tool over agent definitions (`helpers: true`): one tool whose `agent`
 * parameter names a defined helper (an enum) and whose description lists each helper with
 * its description. The model picks a helper; the definition picks everything else
 * (provider, model, tools, instructions, depth bound, background, continuable, timeout),
 * so no provider or transport parameter ever reaches the model.
 *
 * Beside the helpers the tool offers `general`, a plain child on the tool's own provider
 * (spawn by default) with the tool's persona, tool filter, model and workspace, as the
 * tool without helpers would start it: defining a helper must not take away the child the
 * model had before. `helpersOnly: true` leaves it out; a definition named `general` is
 * the team's, and replaces it.
 *
 * The rendering depends only on the definitions (read once, when the composition started)
 * and on which of their providers are registered, so it is byte-stable across turns: it
 * changes only while providers come and go at start-up, and is re-registered only when
 * it really changed.
 */
import { errorMessage, expandToolEntries, isToolPattern } from '@dsh/base'
import type { Context } from 'cordis'
import { text } from '@dsh/llm'
import type { ToolExecution, ToolOutput, ToolReservation } from '@dsh/tools'
import type { AgentDefinition } from '@dsh/agent-definitions'
import type {} from '@dsh/agent'
import { DEFAULT_MAX_DEPTH, firstUnsupportedFeature, tighterBound, wrapRun, type SubagentProvider, type SubagentRequest, type SubagentRun, type SubagentService } from '@dsh/subagent'
import { startBackground } from './background.js'
import { collect } from './foreground.js'
import { belowDepthBound, SUBAGENT_SECTION_ORDER } from './guidance.js'
import { toolDepthBound } from './capabilities.js'

export interface HelperToolArgs {
  agent: string
  description: string
  prompt: string
  run_in_background?: boolean
}

export interface HelperToolSettings {
  toolName: string
  enableRunInBackground: boolean
  /** The tool's own bound, for helpers that set none. */
  maxDepth?: number
  /**
   * The tool's own `toolFilter` (the user's config): the ceiling of every helper it offers,
   * whoever wrote the helper. A definition's `tools` narrows it and never adds to it.
   */
  toolFilter?: { allow?: readonly string[]; deny?: readonly string[] }
}

/** The enum value of the built-in general child. */
export const GENERAL_HELPER = 'general'

/** What of the tool's config the general child runs with: the plain tool's request, as a definition. */
export interface GeneralChildSettings {
  toolName: string
  provider: string
  persona?: string
  agentOptions?: { model?: string }
  toolFilter?: { allow?: readonly string[]; deny?: readonly string[] }
  workspace?: 'shared' | 'worktree' | 'copy'
  sandbox?: boolean | 'no-network'
}

/**
 * The general child as a definition the tool offers first: no file, no instructions but
 * the tool's persona, the tool's provider, model and tool filter. It is no helper (its
 * child's header names none), so nothing a definition carries (rules, budget, skills) applies.
 */
export function generalChild(settings: GeneralChildSettings): AgentDefinition {
  const { allow, deny } = settings.toolFilter ?? {}
  return {
    name: GENERAL_HELPER,
    description: 'A general-purpose agent with your tools and model and no instructions of its own: for a task none of the other helpers fits.',
    provider: settings.provider,
    background: 'allowed',
    continuable: false,
    instructions: settings.persona ?? '',
    ...(settings.agentOptions?.model !== undefined && { model: settings.agentOptions.model }),
    ...(allow !== undefined && { tools: allow }),
    ...(deny !== undefined && { disallowedTools: deny }),
    ...(settings.workspace !== undefined && { workspace: settings.workspace }),
    ...(settings.sandbox !== undefined && { sandbox: settings.sandbox }),
    source: { file: `tool "${settings.toolName}" (built in)`, origin: 'config', flavour: 'dsh', hash: '', lines: {} },
  }
}

/** Why `definition` cannot be offered on `provider` (a host reports these as errors before start), or undefined. */
export function helperUnavailable(definition: AgentDefinition, provider: SubagentProvider | undefined): string | undefined {
  if (!provider) return `its provider "${definition.provider}" is not registered`
  // What every request of this helper will carry, asked of the one check that refuses requests (a
  // tool list and a depth bound; a workspace or sandbox the provider cannot give is refused at the call).
  const hasToolList = definition.tools !== undefined || definition.disallowedTools !== undefined
  switch (firstUnsupportedFeature({ toolFilter: hasToolList ? definition : undefined, maxDepth: definition.maxDepth }, provider.capabilities)) {
    case 'toolFilter':
      return `provider "${provider.name}" cannot enforce a tool list`
    case 'depthLimit':
      return `provider "${provider.name}" cannot enforce a depth limit`
  }
  if (definition.continuable && !provider.prepareContinuable) return `provider "${provider.name}" cannot keep a child across turns`
  // A bound of 0 admits no child at all, not even one of a root.
  if (definition.maxDepth === 0) return 'its maxDepth 0 admits no child'
  return undefined
}

/**
 * The depth bound a helper's child runs under: the tighter of its definition's `maxDepth`
 * and the tool's (its `maxDepth`, else 3 where the provider can enforce one). A definition
 * narrows the tool's bound and never widens it; `ctx.subagents` then also holds the one
 * the calling agent inherited.
 */
export function helperDepthBound(definition: Pick<AgentDefinition, 'maxDepth'>, toolMaxDepth: number | undefined, provider: Pick<SubagentProvider, 'capabilities'>): number | undefined {
  return tighterBound(definition.maxDepth, toolDepthBound(toolMaxDepth, provider))
}

const HELPER_TAGS = ['sees this conversation', 'kept', 'background', 'waits'] as const
type HelperTag = (typeof HELPER_TAGS)[number]
const TAG_MEANING: Readonly<Record<HelperTag, string>> = {
  'sees this conversation': 'it already sees this conversation up to the call; tell it only what is new and what to return.',
  kept: 'the call returns its id at once; you get a message each time it finishes, and send it more work with send_message.',
  background: 'it always runs in the background: the call returns a task id; collect the answer with task_output.',
  waits: 'it always waits for its answer, whatever run_in_background says.',
}

/** What the model sees: the tool description (one line per helper) and its parameters. */
export function helperRendering(offered: readonly { definition: AgentDefinition; provider: SubagentProvider }[], enableRunInBackground: boolean): { description: string; parameters: Record<string, unknown> } {
  const background = enableRunInBackground && offered.some(({ definition }) => definition.background === 'allowed' && !definition.continuable)
  // Each helper costs its line: name, description and a short tag where it differs from
  // the rest; what a tag means is said once, and only when some helper has it.
  const used = new Set<HelperTag>()
  const lines = [
    'Delegate a task to one of the helpers below: set agent to its name. Each helper is its own agent with its own instructions, tools and model; it does not see this conversation, so give it a complete brief, and it returns its final answer (unless tagged otherwise).',
    'Helpers:',
  ]
  for (const { definition, provider } of offered) {
    const tags: HelperTag[] = []
    if (provider.inheritsParentContext) tags.push('sees this conversation')
    if (definition.continuable) tags.push('kept')
    else if (definition.background === 'always') tags.push('background')
    else if (definition.background === 'never' && background) tags.push('waits')
    for (const tag of tags) used.add(tag)
    lines.push(`- ${definition.name}: ${definition.description}${tags.map((tag) => ` [${tag}]`).join('')}`)
  }
  for (const tag of HELPER_TAGS) if (used.has(tag)) lines.push(`[${tag}]: ${TAG_MEANING[tag]}`)
  if (background) lines.push('Set run_in_background to keep working while a helper runs; collect its answer later with task_output.')
  const properties: Record<string, unknown> = {
    agent: { type: 'string', enum: offered.map(({ definition }) => definition.name), description: 'The helper that does the task (see the list in this tool\'s description).' },
    description: { type: 'string', minLength: 1, description: 'A short (3-5 word) label for the task, shown to the user.' },
    prompt: { type: 'string', minLength: 1, description: 'The task for the helper: everything it needs to know (only what is new for one tagged [sees this conversation]) and what to return.' },
  }
  if (background) properties.run_in_background = { type: 'boolean', description: 'Start the helper and return at once with a task id instead of waiting for its answer.' }
  return { description: lines.join('\n'), parameters: { type: 'object', properties, required: ['agent', 'description', 'prompt'], additionalProperties: false } }
}

/** The system-prompt guidance of a helper tool. */
export function helperGuidance(toolName: string): string {
  return [
    `# Delegating with \`${toolName}\``,
    `- \`${toolName}\` hands a task to a named helper; its description lists them. Pick the helper whose description fits the task; do small or tightly coupled work yourself.`,
    `- Independent delegations belong in one step: call \`${toolName}\` several times in the same response and the helpers run in parallel.`,
    "- A helper's answer is for you, not the user: check it, then pass on what matters.",
  ].join('\n')
}

/** Mounts the helper tool and keeps it in step with the helpers' providers. */
export class HelperTool {
  private offered = new Map<string, { definition: AgentDefinition; provider: SubagentProvider }>()
  private rendered: string | undefined
  private unregister: (() => void) | undefined
  /** The built-in general child, first in the list; absent with helpersOnly or when a definition takes its name. */
  private readonly general: AgentDefinition | undefined

  constructor(
    private readonly ctx: Context,
    private readonly settings: HelperToolSettings,
    private readonly reservation: ToolReservation,
    private readonly subagents: SubagentService,
    private readonly definitions: readonly AgentDefinition[],
    general?: AgentDefinition,
  ) {
    this.general = general && !definitions.some((definition) => definition.name === general.name) ? general : undefined
    const providers = new Set([...definitions, ...(this.general ? [this.general] : [])].map((definition) => definition.provider))
    ctx.on('subagent/provider-added', (provider) => {
      if (providers.has(provider.name)) this.mount()
    })
    ctx.on('subagent/provider-removed', (name) => {
      if (providers.has(name)) this.mount()
    })
    ctx.effect(() => () => this.unmount(), 'tool-subagent: unmount helpers')
    // Definitions are read when the composition starts, so a child whose recorded hash
    // differs was started by an earlier process from an earlier file: a cold resume. It
    // keeps the instructions it started with (its descriptor's); say that the file moved on.
    const log = ctx.logger('tool-subagent')
    ctx.subagents.registerContinuableSetup((_childCtx, child) => {
      const recorded = child.session.header.helper
      if (recorded === undefined) return
      const current = definitions.find((definition) => definition.name === recorded.name)
      if (current === undefined) log.warn('subagent %s was started as helper "%s", which is no longer defined; it keeps the instructions it started with', child.id, recorded.name)
      else if (current.source.hash !== recorded.hash) {
        log.warn('subagent %s was started as helper "%s" from an earlier version of %s (it has changed since); it keeps the instructions it started with', child.id, recorded.name, current.source.file)
      }
    })
    if (definitions.length === 0) ctx.logger('tool-subagent').warn('tool "%s" offers helpers, but no agent definitions were found', settings.toolName)
    // A helper set deeper than the tool allows runs under the tool's bound: say where to raise it.
    const toolBound = settings.maxDepth ?? DEFAULT_MAX_DEPTH
    for (const definition of definitions) {
      if (definition.maxDepth === undefined || definition.maxDepth <= toolBound) continue
      log.warn(
        '%s:%d: helper "%s" sets maxDepth %d, above the bound %d of tool "%s", and runs under %d; to let it go deeper, raise maxDepth in the config of the tool (@dsh/tool-subagent)',
        definition.source.file, definition.source.lines.maxDepth ?? 1, definition.name, definition.maxDepth, toolBound, settings.toolName, toolBound,
      )
    }
    for (const line of toolsOutsideCeiling(definitions, settings)) log.warn('%s', line)
    this.mount()
  }

  private mount(): void {
    const offered = [...(this.general ? [this.general] : []), ...this.definitions].flatMap((definition) => {
      const provider = this.subagents.getProvider(definition.provider)
      return helperUnavailable(definition, provider) === undefined ? [{ definition, provider: provider! }] : []
    })
    if (offered.length === 0) {
      this.unmount()
      return
    }
    const rendering = helperRendering(offered, this.settings.enableRunInBackground)
    const key = JSON.stringify(rendering)
    // Byte-stable: a provider event that changes nothing the model sees leaves the tool as it is.
    if (key === this.rendered && this.unregister) return
    this.unmount()
    this.offered = new Map(offered.map((entry) => [entry.definition.name, entry]))
    const unregisterTool = this.reservation.register<HelperToolArgs>({
      ...rendering,
      concurrencySafe: true,
      execute: (args, exec) => this.execute(args, exec),
    })
    const { toolName } = this.settings
    const guidance = helperGuidance(toolName)
    let removeSection: () => void
    try {
      removeSection = this.ctx.agents.addPromptSection({
        name: `subagent:${toolName}`,
        order: SUBAGENT_SECTION_ORDER,
        tool: toolName,
        visible: (agent) => belowDepthBound(agent, this.settings.maxDepth ?? DEFAULT_MAX_DEPTH),
        render: () => guidance,
      })
    } catch (error) {
      unregisterTool()
      throw error
    }
    this.rendered = key
    this.unregister = () => {
      removeSection()
      unregisterTool()
    }
  }

  private unmount(): void {
    const unregister = this.unregister
    this.unregister = undefined
    this.rendered = undefined
    unregister?.()
  }

  private execute(args: HelperToolArgs, exec: ToolExecution): Promise<ToolOutput> {
    const entry = this.offered.get(args.agent)
    if (!entry) return Promise.resolve({ isError: true, content: `there is no helper named "${args.agent}"; helpers: ${[...this.offered.keys()].join(', ')}` })
    const { definition, provider } = entry
    // The tool's filter is every helper's ceiling: a child its provider cannot filter would be past it.
    if (firstUnsupportedFeature({ toolFilter: this.settings.toolFilter }, provider.capabilities) === 'toolFilter') {
      return Promise.resolve({
        isError: true,
        content: `the helper "${definition.name}" could not be started: its provider "${provider.name}" cannot limit its child's tools, and tool "${this.settings.toolName}" has a toolFilter that limits every helper it offers; run the helper on spawn or fork, or remove toolFilter from the config of the tool (@dsh/tool-subagent)`,
      })
    }
    const request = this.request(definition, provider, args, exec)
    if (definition.continuable) return this.startContinuable(definition, request, exec)
    const background = definition.background === 'always' || (definition.background === 'allowed' && args.run_in_background === true && this.settings.enableRunInBackground)
    const wrap = definition.timeoutMs === undefined ? undefined : (run: SubagentRun) => withTimeout(run, definition.timeoutMs!)
    if (background) return startBackground(this.ctx, provider.name, request, exec, wrap)
    return this.subagents.start(provider.name, request).then(
      (run) => collect(wrap ? wrap(run) : run, provider.name, definition.name),
      (error: unknown) => ({ isError: true, content: `the helper "${definition.name}" could not be started: ${errorMessage(error)}` }),
    )
  }

  private async startContinuable(definition: AgentDefinition, request: SubagentRequest, exec: ToolExecution): Promise<ToolOutput> {
    const { prompt, parent, callId, maxDepth, agentOptions, persona, toolFilter, helper, permissions, budget, workspace, sandbox } = request
    try {
      const { childId } = await this.subagents.startContinuable({
        provider: definition.provider,
        label: request.label ?? definition.name,
        request: { prompt, parent, ...(callId !== undefined && { callId }), ...(maxDepth !== undefined && { maxDepth }), ...(agentOptions && { agentOptions }), ...(persona !== undefined && { persona }), ...(toolFilter && { toolFilter }), ...(helper && { helper }), ...(permissions && { permissions }), ...(budget && { budget }), ...(workspace !== undefined && { workspace }), ...(sandbox !== undefined && { sandbox }) },
        signal: exec.signal,
      })
      return `started continuable helper "${definition.name}" as subagent ${childId}. You will get a message when its turn ends; send it more work with send_message (subagent_id ${childId}).`
    } catch (error) {
      return { isError: true, content: `the helper "${definition.name}" could not be started: ${errorMessage(error)}` }
    }
  }

  /** The definition as a request: it decides everything but the task and its label. */
  private request(definition: AgentDefinition, provider: SubagentProvider, args: HelperToolArgs, exec: ToolExecution): SubagentRequest {
    return helperRequest(this.ctx, definition, provider, { prompt: args.prompt, label: args.description, parent: exec.agent, signal: exec.signal, callId: exec.callId, general: definition === this.general }, this.settings)
  }
}

/** One call of a helper: the task, who asks and the call's handles (`general`: the built-in general child, which names no helper). */
export interface HelperCall {
  prompt: string
  label: string
  parent: ToolExecution['agent']
  signal: AbortSignal
  callId?: string
  general?: boolean
}

/**
 * A helper definition as a request: it decides everything but the task and its label.
 * The helper tool asks it for each call; `@dsh/workflow` for each `agent()` call, so a
 * helper becomes the same child whoever starts it.
 */
export function helperRequest(ctx: Context, definition: AgentDefinition, provider: SubagentProvider, call: HelperCall, settings: Pick<HelperToolSettings, 'maxDepth' | 'toolFilter'>): SubagentRequest {
  const { instructions } = definition
  // A provider that cannot replace its child's persona gets the instructions at the head of the task.
  const asPersona = instructions !== '' && provider.capabilities.persona
  const task = instructions !== '' && !asPersona ? `${instructions}\n\n---\n\n${call.prompt}` : call.prompt
  const request: SubagentRequest = {
    prompt: [text(task)],
    parent: call.parent,
    signal: call.signal,
    label: call.label,
    ...(call.callId !== undefined && { callId: call.callId }),
  }
  if (call.general !== true) request.helper = { name: definition.name, hash: definition.source.hash }
  if (asPersona) request.persona = instructions
  if (definition.model !== undefined) request.agentOptions = { model: definition.model }
  if (definition.budget !== undefined) request.budget = { ...definition.budget }
  // A level of the helper's own under everything its parent is under (see @dsh/approvals).
  if (definition.permissions !== undefined) request.permissions = [definition.permissions]
  if (definition.workspace !== undefined && definition.workspace !== 'shared') request.workspace = definition.workspace
  if (definition.sandbox !== undefined && definition.sandbox !== false) request.sandbox = definition.sandbox
  const maxDepth = helperDepthBound(definition, settings.maxDepth, provider)
  if (maxDepth !== undefined) request.maxDepth = maxDepth
  const toolFilter = childToolFilter(ctx, definition, call.parent.id, settings.toolFilter)
  if (toolFilter !== undefined) request.toolFilter = toolFilter
  // The names only: a provider whose child is another program resolves each in its own config.
  if (definition.mcpServers !== undefined && definition.mcpServers.length > 0) request.mcpServers = definition.mcpServers.map((entry) => (typeof entry === 'string' ? entry : entry.name))
  return request
}

/**
 * The child's allow list: the definition's, narrowed to what the calling agent can see
 * when its own tools are filtered, so a helper never hands a child a tool its parent was
 * denied (a caller without bash cannot get bash through a helper that lists none).
 */
function inheritedAllow(ctx: Context, definition: { tools?: readonly string[] | undefined; provider: string }, callerId: string): readonly string[] | undefined {
  if (!ctx.subagents.getProvider(definition.provider)?.capabilities.toolFilter) return definition.tools
  const everything = ctx.tools.list()
  const visible = new Set(ctx.tools.visibleNames(callerId))
  if (everything.every((name) => visible.has(name))) return definition.tools
  return (definition.tools ?? everything).filter((name) => visible.has(name))
}

/**
 * The child's tool filter: the definition's lists under the tool's own filter (the
 * ceiling, see `helperToolFilter`), the allow list then narrowed to what the calling agent sees.
 */
function childToolFilter(ctx: Context, definition: AgentDefinition, callerId: string, ceiling: HelperToolSettings['toolFilter']): { allow?: readonly string[]; deny?: readonly string[] } | undefined {
  // Patterns (mcp__github__*) name the tools registered now: an MCP server's, listed at start.
  const known = ctx.tools.list()
  const provider = ctx.subagents.getProvider(definition.provider)
  // A server some helper names (mcpServers:) is that helper's: hidden from the helpers that do not name it.
  const hidden = provider?.capabilities.toolFilter ? serversOfOtherHelpers(ctx, definition).map((server) => `mcp__${server}__*`) : []
  // A child of another process (a queue worker) reads a deny pattern against its own tools, not the parent's.
  const denied = [...(definition.disallowedTools ?? []), ...hidden]
  const deny = provider?.inProcess === true ? expandToolEntries(denied, known) : denied
  const named = {
    ...(definition.tools && { tools: expandToolEntries(definition.tools, known) }),
    // A hidden server with no tools here (not started) adds nothing: no filter of an empty deny list.
    ...((definition.disallowedTools !== undefined || deny.length > 0) && { disallowedTools: deny }),
  }
  const filter = helperToolFilter(named, ceiling)
  const allow = inheritedAllow(ctx, { tools: filter?.allow, provider: definition.provider }, callerId)
  if (allow === undefined && filter?.deny === undefined) return undefined
  return { ...(allow && { allow }), ...(filter?.deny && { deny: filter.deny }) }
}

/** The MCP servers other helpers name in `mcpServers:` and `definition` does not. */
function serversOfOtherHelpers(ctx: Context, definition: AgentDefinition): string[] {
  const nameOf = (entry: string | { name: string }) => (typeof entry === 'string' ? entry : entry.name)
  const mine = new Set((definition.mcpServers ?? []).map(nameOf))
  const others = new Set<string>()
  for (const other of ctx.get('agentDefinitions')?.list() ?? []) for (const entry of other.mcpServers ?? []) if (!mine.has(nameOf(entry))) others.add(nameOf(entry))
  return [...others]
}

/**
 * A helper's tool filter under the tool's own (`ceiling`, the user's config): its allow
 * list is the definition's `tools` kept to what the ceiling allows (the ceiling's list for
 * a helper that names none) and its deny list both deny lists, so a definition narrows the
 * tool's filter and never adds to it. Undefined: no filter at all.
 */
export function helperToolFilter(
  definition: Pick<AgentDefinition, 'tools' | 'disallowedTools'>,
  ceiling: { allow?: readonly string[]; deny?: readonly string[] } | undefined,
): { allow?: readonly string[]; deny?: readonly string[] } | undefined {
  const denied = [...(definition.disallowedTools ?? []), ...(ceiling?.deny ?? []).filter((name) => !definition.disallowedTools?.includes(name))]
  const deny = definition.disallowedTools !== undefined || ceiling?.deny !== undefined ? denied : undefined
  let allow = definition.tools
  if (ceiling?.allow !== undefined) allow = (allow ?? ceiling.allow).filter((name) => ceiling.allow!.includes(name))
  if (allow !== undefined && deny !== undefined) allow = allow.filter((name) => !deny.includes(name))
  if (allow === undefined && deny === undefined) return undefined
  return { ...(allow && { allow }), ...(deny && { deny }) }
}

/**
 * One warning line for each helper whose `tools` names a tool the tool's own filter does
 * not allow: its child runs without it, and the line says where the ceiling is set.
 */
export function toolsOutsideCeiling(definitions: readonly AgentDefinition[], settings: Pick<HelperToolSettings, 'toolName' | 'toolFilter'>): string[] {
  const ceiling = settings.toolFilter
  if (ceiling === undefined) return []
  const lines: string[] = []
  for (const definition of definitions) {
    // A pattern is kept to the ceiling when the child starts, against the tools there are then.
    const outside = (definition.tools ?? []).filter((name) => !isToolPattern(name) && ((ceiling.allow !== undefined && !ceiling.allow.includes(name)) || ceiling.deny?.includes(name)))
    if (outside.length === 0) continue
    const names = outside.map((name) => `"${name}"`).join(', ')
    lines.push(
      `${definition.source.file}:${definition.source.lines.tools ?? 1}: helper "${definition.name}" lists ${names} in tools, which the toolFilter of tool "${settings.toolName}" does not allow, and runs without ${outside.length > 1 ? 'them' : 'it'}; a helper's tools narrow the tool's toolFilter and never widen it: to give ${outside.length > 1 ? 'them' : 'it'}, change toolFilter in the config of the tool (@dsh/tool-subagent)`,
    )
  }
  return lines
}

/** `run`, cancelled once `ms` have passed; its result then says the helper's time ran out. */
export function withTimeout(run: SubagentRun, ms: number): SubagentRun {
  let timedOut = false
  const timer = setTimeout(() => {
    timedOut = true
    run.cancel(new Error(`the helper's timeoutMs (${ms}) ran out`))
  }, ms)
  timer.unref?.()
  const result = run.result.then(
    (settled) => {
      clearTimeout(timer)
      return timedOut && settled.stopReason === 'aborted' ? { ...settled, stopReason: 'error' as const, diagnostic: `it ran longer than its timeoutMs (${ms} ms) and was stopped` } : settled
    },
    (error: unknown) => {
      clearTimeout(timer)
      throw error
    },
  )
  const dispose = () => {
    clearTimeout(timer)
    return run.dispose()
  }
  return wrapRun(run, { result, dispose })
}
