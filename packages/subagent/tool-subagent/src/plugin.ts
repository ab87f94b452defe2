import { errorMessage } from '@dsh/base'
import type { Context } from 'cordis'
import Schema from 'schemastery'
import { text } from '@dsh/llm'
import type { ToolExecution, ToolOutput, ToolReservation } from '@dsh/tools'
import { callsClosedByInterruption, serviceInstance } from '@dsh/agent'
import { firstUnsupportedFeature, type SubagentProvider, type SubagentRequest } from '@dsh/subagent'
import { toolDepthBound } from './capabilities.js'
import { startBackground } from './background.js'
import { collect } from './foreground.js'
import { toolParameters, type SubagentToolArgs } from './schema.js'
import { providerWording } from './wording.js'
import { SubagentToolError } from './errors.js'
import { belowDepthBound, delegationGuidance, SUBAGENT_SECTION_ORDER } from './guidance.js'
import { generalChild, HelperTool } from './helpers.js'
import type {} from '@dsh/agent-definitions'

export interface SubagentToolConfig {
  /** Required unless `helpers`; with `helpers`, the general child's (default spawn). */
  provider?: string
  /** Offer the agent definitions of `ctx.agentDefinitions` as named helpers instead (see `helpers.ts`). */
  helpers: boolean
  /** With `helpers`: offer the helpers alone, without the general child. */
  helpersOnly: boolean
  toolName: string
  enableRunInBackground: boolean
  /** What `run_in_background` starts: a one-shot task, or a continuable child. */
  backgroundMode: 'one-shot' | 'continuable'
  agentOptions: { model?: string }
  persona?: string
  toolFilter?: { allow?: string[]; deny?: string[] }
  /** Unset: 3 for providers that support depth limits, none for those that do not. */
  maxDepth?: number
  /** Where every child of this tool works: the parent's directory (default), or a worktree or copy of its own. */
  workspace: 'shared' | 'worktree' | 'copy'
  /** Confine every child's commands (bubblewrap); `no-network` also cuts its network. */
  sandbox: boolean | 'no-network'
}

type ToolFilterConfig = { allow?: string[]; deny?: string[] }

/**
 * `default(undefined)`: an absent list stays absent, so `allow: []` (no tools at all) is
 * told apart from no filter. A filter with neither list (`toolFilter: {}`) is a config
 * error, not "allow everything": the author meant to restrict something. The keys stay
 * listed on the inner object (`schema.inner.dict`) for strict unknown-key checks.
 */
export const ToolFilterSchema: Schema<ToolFilterConfig, ToolFilterConfig> = Schema.transform(
  Schema.object({
    allow: Schema.array(Schema.string()).default(undefined as unknown as string[]).description('Only these tools (by name).'),
    deny: Schema.array(Schema.string()).default(undefined as unknown as string[]).description('Every tool but these.'),
  }) as Schema<ToolFilterConfig, ToolFilterConfig>,
  (filter: ToolFilterConfig) => {
    if (filter.allow === undefined && filter.deny === undefined) {
      throw new TypeError('toolFilter needs `allow` or `deny` (a list of tool names); remove toolFilter to give children every tool')
    }
    return filter
  },
)

export interface SubagentToolMountProblem {
  code: 'NO_PROVIDER' | 'DEPTH_UNSUPPORTED' | 'CONTINUATION_UNSUPPORTED' | 'UNSUPPORTED_CAPABILITY'
  /** One line naming the tool and the provider, and what to change. */
  message: string
}

/**
 * Why a tool with this config is not (or would not be) mounted on `provider`, or
 * undefined when it is mountable. The plugin refuses to mount for exactly these reasons;
 * a host checks every tool with it once start-up is over, because a provider that
 * registers after the tool (siblings start concurrently) can only be refused in the log.
 */
export function subagentToolMountProblem(
  config: Pick<SubagentToolConfig, 'toolName' | 'maxDepth' | 'backgroundMode'> & Partial<Pick<SubagentToolConfig, 'workspace' | 'sandbox'>> & { provider: string },
  provider: SubagentProvider | undefined,
  registered: readonly string[] = [],
): SubagentToolMountProblem | undefined {
  if (!provider) {
    return { code: 'NO_PROVIDER', message: `tool "${config.toolName}" is bound to subagent provider "${config.provider}", which is not registered (registered: ${registered.join(', ') || 'none'})` }
  }
  // What every request of this tool will carry, asked of the one check that refuses requests.
  switch (firstUnsupportedFeature({ maxDepth: config.maxDepth, workspace: config.workspace, sandbox: config.sandbox }, provider.capabilities)) {
    case 'depthLimit':
      return {
        code: 'DEPTH_UNSUPPORTED',
        message: `tool "${config.toolName}" sets maxDepth ${config.maxDepth}, but subagent provider "${provider.name}" cannot enforce a depth limit; remove maxDepth from the tool's config or use a provider that supports it`,
      }
    case 'workspace':
      return {
        code: 'UNSUPPORTED_CAPABILITY',
        message: `tool "${config.toolName}" sets workspace ${config.workspace}, but subagent provider "${provider.name}" cannot give its child a directory of its own (its children work on another host); use workspace: shared, or a provider that can (spawn, fork, acp, codex, claude-code)`,
      }
    case 'sandbox':
      return {
        code: 'UNSUPPORTED_CAPABILITY',
        message: `tool "${config.toolName}" sets sandbox, but subagent provider "${provider.name}" cannot confine its child's commands (only in-process children can: spawn, fork)`,
      }
  }
  if (config.backgroundMode === 'continuable' && !provider.prepareContinuable) {
    return {
      code: 'CONTINUATION_UNSUPPORTED',
      message: `tool "${config.toolName}" sets backgroundMode continuable, but subagent provider "${provider.name}" cannot keep a child across turns; use backgroundMode one-shot or a provider that can (spawn, fork)`,
    }
  }
  return undefined
}

/**
 * The model-facing `subagent` tool, bound by config to one provider. It exists exactly
 * while that provider is registered (it follows `subagent/provider-added` and
 * `-removed`, so load order never matters), and its wording comes from the provider.
 */
export class SubagentToolPlugin {
  static inject = ['subagents', 'tools', 'agents']
  static Config: Schema<SubagentToolConfig> = Schema.object({
    provider: Schema.string().min(1).description('The ctx.subagents provider this tool starts runs on (required unless helpers).'),
    helpers: Schema.boolean().default(false).description('Offer the agent definitions (ctx.agentDefinitions, @dsh/agent-definitions) as named helpers: one tool, the model picks a helper by name, each definition picks its provider, model, tools and instructions; a general child (agent: general, on provider, default spawn, with this tool\'s persona, toolFilter, model and workspace) is offered beside them.'),
    helpersOnly: Schema.boolean().default(false).description('With helpers: offer the helpers alone, without the general child.'),
    toolName: Schema.string().pattern(/^[A-Za-z0-9_-]{1,64}$/).default('subagent').description('The model-facing tool name; distinct per instance.'),
    enableRunInBackground: Schema.boolean().default(true).description('Offer run_in_background in the schema.'),
    backgroundMode: Schema.union(['one-shot', 'continuable']).default('one-shot').description('run_in_background starts a one-shot task (collected with task_output) or a continuable child (its id returned at once, a notice at each settlement, more work with send_message).'),
    agentOptions: (Schema.object({ model: Schema.string() }) as Schema<{ model?: string }>).default({}).description('Per-child options (model spec).'),
    persona: Schema.string().min(1).description('Persona for every child of this tool.'),
    toolFilter: ToolFilterSchema.description('Allow/deny lists for the children\'s tools; at least one of the two.'),
    maxDepth: Schema.natural().description('Absolute delegation depth bound (default 3 where the provider supports depth limits).'),
    workspace: Schema.union(['shared', 'worktree', 'copy']).default('shared').description("Where every child works: the parent's directory (shared), a git worktree on a branch of its own (worktree), or a copy of a directory that is not a repository (copy); its result says what it changed, merged back with the workspace tool."),
    sandbox: Schema.union([Schema.boolean(), Schema.const('no-network')]).default(false).description("Confine every child's commands: its working directory writable, the rest read-only, no other process visible; no-network also cuts the network. Needs bubblewrap (bwrap)."),
  })

  private unregister: (() => void) | undefined
  /** The `maxDepth` every request carries, decided when the tool mounts on its provider (see `request`). */
  private mountedMaxDepth: number | undefined
  /** Held directly for the per-call path (see `serviceInstance`); the plugin restarts with the service. */
  private readonly subagents: Context['subagents']

  /** The tool name, claimed at load: a clash fails the plugin now, whatever the load order. */
  private readonly reservation: ToolReservation

  constructor(private readonly ctx: Context, private readonly config: SubagentToolConfig) {
    this.subagents = serviceInstance(ctx.subagents)
    this.reservation = ctx.tools.reserve(config.toolName)
    if (config.helpers) {
      // Waits for the definitions service; without it (a composition that loads none) there is no tool.
      let found = false
      ctx.inject(['agentDefinitions'], (scoped) => {
        found = true
        // The plain child stays beside the helpers unless the config says helpers only.
        const general = config.helpersOnly ? undefined : generalChild({ ...config, provider: config.provider ?? 'spawn' })
        new HelperTool(scoped, config, this.reservation, this.subagents, scoped.agentDefinitions.list(), general)
      })
      // Siblings start concurrently; still absent a moment later, nobody loaded the plugin.
      const timer = setTimeout(() => {
        if (!found) ctx.logger('tool-subagent').warn('tool "%s" offers helpers, but @dsh/agent-definitions is not loaded: there is no tool', config.toolName)
      }, 1000)
      timer.unref()
      ctx.effect(() => () => clearTimeout(timer), 'tool-subagent: definitions check')
      return
    }
    if (config.provider === undefined) throw new SubagentToolError('NO_PROVIDER', `tool "${config.toolName}" needs a provider (or helpers: true)`)
    const bound = config.provider
    const log = ctx.logger('tool-subagent')
    ctx.on('subagent/provider-added', (provider) => {
      if (provider.name !== config.provider) return
      try {
        this.mount(provider)
      } catch (error) {
        // Nobody awaits an event: the tool stays absent and the log says why.
        log.error('%s', errorMessage(error))
      }
    })
    ctx.on('subagent/provider-removed', (name) => {
      if (name === config.provider) this.unmount()
    })
    // A resumed parent takes up the calls its dead process left unanswered, where the
    // provider's children outlive that process (a queue job): made again in the background,
    // each finds its child and its result reaches the parent as a task notice.
    ctx.agents.onResume((agent) => this.takeUpInterruptedCalls(agent))
    const present = ctx.subagents.getProvider(bound)
    // Present at load: a provider that cannot honour this config fails the plugin now.
    if (present) this.mount(present)
    else {
      log.info('tool "%s" waits for subagent provider "%s"', config.toolName, config.provider)
      // Siblings load concurrently, so absence now is normal; absence a moment later is a typo.
      const timer = setTimeout(() => {
        if (!this.unregister) {
          log.warn('tool "%s" is not available: no subagent provider named "%s" is registered (registered: %s)', config.toolName, config.provider, ctx.subagents.list().join(', ') || 'none')
        }
      }, 1000)
      timer.unref()
      ctx.effect(() => () => clearTimeout(timer), 'tool-subagent: provider check')
    }
    ctx.effect(() => () => this.unmount(), 'tool-subagent: unmount')
  }

  private mount(provider: SubagentProvider): void {
    this.unmount()
    const problem = subagentToolMountProblem({ ...this.config, provider: provider.name }, provider)
    if (problem) throw new SubagentToolError(problem.code, problem.message)
    const background = this.config.enableRunInBackground
    const wording = providerWording(provider, background, this.config.backgroundMode)
    const unregisterTool = this.reservation.register<SubagentToolArgs>({
      description: wording.description,
      parameters: toolParameters(wording, background, this.config.backgroundMode === 'continuable'),
      concurrencySafe: true,
      execute: (args, exec) => this.execute(args, exec),
    })
    const { toolName } = this.config
    const guidance = delegationGuidance(toolName, provider.inheritsParentContext, background ? this.config.backgroundMode : 'off')
    const maxDepth = this.requestMaxDepth()
    this.mountedMaxDepth = maxDepth
    let removeSection: () => void
    try {
      removeSection = this.ctx.agents.addPromptSection({
        name: `subagent:${toolName}`,
        order: SUBAGENT_SECTION_ORDER,
        tool: toolName,
        // An agent at the depth bound keeps the tool (its calls are refused) but gets no advice to use it.
        visible: (agent) => belowDepthBound(agent, maxDepth),
        render: () => guidance,
      })
    } catch (error) {
      unregisterTool()
      throw error
    }
    this.unregister = () => {
      removeSection()
      unregisterTool()
    }
  }

  /** See the constructor: this tool's interrupted calls, made again as background calls when its provider's calls are resumable. */
  private takeUpInterruptedCalls(agent: ToolExecution['agent']): void {
    const provider = this.config.provider !== undefined ? this.subagents.getProvider(this.config.provider) : undefined
    if (!provider?.resumableCalls || !this.unregister || !this.ctx.get('tasks')) return
    const log = this.ctx.logger('tool-subagent')
    for (const call of callsClosedByInterruption(agent.session)) {
      if (call.name !== this.config.toolName) continue
      const args = call.args as Partial<SubagentToolArgs> | undefined
      if (typeof args?.prompt !== 'string') continue
      const exec: ToolExecution = { agent, callId: call.id, signal: new AbortController().signal }
      void startBackground(this.ctx, provider.name, this.request({ ...args, prompt: args.prompt, run_in_background: true } as SubagentToolArgs, exec), exec).then(
        (output) => log.info('took up the interrupted call %s of session %s: %s', call.id, agent.id, typeof output === 'string' ? output : JSON.stringify(output.content)),
        (error: unknown) => log.warn('could not take up the interrupted call %s of session %s: %s', call.id, agent.id, errorMessage(error)),
      )
    }
  }

  /** The `maxDepth` every request of this tool carries (see `request`). */
  private requestMaxDepth(): number | undefined {
    return toolDepthBound(this.config.maxDepth, this.subagents.getProvider(this.config.provider!))
  }

  private unmount(): void {
    const unregister = this.unregister
    this.unregister = undefined
    unregister?.()
  }

  private execute(args: SubagentToolArgs, exec: ToolExecution): Promise<ToolOutput> {
    // A continuable instance always starts a child it keeps, whatever the call says: a
    // foreground call silently run one-shot would leave nothing to send_message later.
    if (this.config.backgroundMode === 'continuable') return this.startContinuable(args, exec)
    const provider = this.config.provider!
    if (args.run_in_background) return startBackground(this.ctx, provider, this.request(args, exec), exec)
    // One promise stage per outcome: returning `collect(run)` from an async function
    // would cost every child of a fan-out two more ticks.
    return this.subagents.start(provider, this.request(args, exec)).then((run) => collect(run, provider), notStarted)
  }

  /** A continuable child: its id at once; its parent hears of every settled turn through a notice. */
  private async startContinuable(args: SubagentToolArgs, exec: ToolExecution): Promise<ToolOutput> {
    const { prompt, parent, callId, maxDepth, agentOptions, persona, toolFilter, workspace, sandbox } = this.request(args, exec)
    try {
      const { childId } = await this.subagents.startContinuable({
        provider: this.config.provider!,
        label: args.description,
        request: { prompt, parent, ...(callId !== undefined && { callId }), ...(maxDepth !== undefined && { maxDepth }), ...(agentOptions && { agentOptions }), ...(persona !== undefined && { persona }), ...(toolFilter && { toolFilter }), ...(workspace !== undefined && { workspace }), ...(sandbox !== undefined && { sandbox }) },
        signal: exec.signal,
      })
      return `started continuable subagent ${childId}. You will get a message when its turn ends; send it more work with send_message (subagent_id ${childId}).`
    } catch (error) {
      return { isError: true, content: `the subagent could not be started: ${errorMessage(error)}` }
    }
  }

  private request(args: SubagentToolArgs, exec: ToolExecution): SubagentRequest {
    const { config } = this
    const request: SubagentRequest = {
      prompt: [text(args.prompt)],
      parent: exec.agent,
      signal: exec.signal,
      label: args.description,
      callId: exec.callId,
    }
    // An explicit maxDepth was checked against the provider when the tool mounted; the
    // default bound applies only where the provider can enforce it.
    const maxDepth = this.mountedMaxDepth
    if (maxDepth !== undefined) request.maxDepth = maxDepth
    if (config.agentOptions.model !== undefined) request.agentOptions = { model: config.agentOptions.model }
    if (config.persona !== undefined) request.persona = config.persona
    const { allow, deny } = config.toolFilter ?? {}
    if (allow !== undefined || deny !== undefined) request.toolFilter = { ...(allow && { allow }), ...(deny && { deny }) }
    if (config.workspace !== undefined && config.workspace !== 'shared') request.workspace = config.workspace
    if (config.sandbox !== undefined && config.sandbox !== false) request.sandbox = config.sandbox
    return request
  }
}

/** A start that was refused, as the tool's result (a module function: no closure per call). */
function notStarted(error: unknown): ToolOutput {
  return { isError: true, content: `the subagent could not be started: ${errorMessage(error)}` }
}

export default SubagentToolPlugin
