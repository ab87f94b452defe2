/**
 * One session's spans, built from its events: the same code for a live session (each
 * event as it is appended) and a stored one (`dsh sessions trace`, every event replayed
 * with its own timestamp). The shape is OpenTelemetry's GenAI semantic conventions
 * (v1.45.0, Development): an `invoke_agent` span per turn, a `chat` span per model request
 * (a step's response), an `execute_tool` span per tool call, the tool calls beside the
 * request that asked for them under the turn. A child's `invoke_agent` spans go under the
 * parent's `execute_tool` span of the delegating call, in this process or another.
 */
import { ROOT_CONTEXT, SpanKind, SpanStatusCode, trace, type Attributes, type Context, type Span, type Tracer } from './otel.js'
import { mcpServerOf } from '@dsh/base'
import { textOf } from '@dsh/llm'
import type { SessionEvent, SessionHeader, ToolPermissionRecord } from '@dsh/session'

/** The GenAI attribute names used here (semantic conventions v1.45.0). */
export const GEN_AI = {
  operation: 'gen_ai.operation.name',
  provider: 'gen_ai.provider.name',
  agentName: 'gen_ai.agent.name',
  agentId: 'gen_ai.agent.id',
  agentDescription: 'gen_ai.agent.description',
  conversation: 'gen_ai.conversation.id',
  requestModel: 'gen_ai.request.model',
  responseModel: 'gen_ai.response.model',
  inputTokens: 'gen_ai.usage.input_tokens',
  outputTokens: 'gen_ai.usage.output_tokens',
  cacheReadTokens: 'gen_ai.usage.cache_read.input_tokens',
  finishReasons: 'gen_ai.response.finish_reasons',
  toolName: 'gen_ai.tool.name',
  toolCallId: 'gen_ai.tool.call.id',
  toolType: 'gen_ai.tool.type',
  toolArguments: 'gen_ai.tool.call.arguments',
  toolResult: 'gen_ai.tool.call.result',
  inputMessages: 'gen_ai.input.messages',
  outputMessages: 'gen_ai.output.messages',
  errorType: 'error.type',
} as const

/** dsh's own attributes: where the agent stands in the tree. */
export const DSH = {
  session: 'dsh.session.id',
  parentSession: 'dsh.parent_session.id',
  depth: 'dsh.delegation.depth',
  subagentProvider: 'dsh.subagent.provider',
  origin: 'dsh.session.origin',
  turn: 'dsh.turn',
  stopReason: 'dsh.stop_reason',
  mcpServer: 'dsh.mcp.server',
} as const

export interface SessionSpansOptions {
  /** Record prompts, completions, tool arguments and results (off by default). */
  captureContent: boolean
  /** Keep ended tool spans for `spanOf` (a stored tree, whose children are replayed after their parent). */
  keepEnded?: boolean
}

/** `adapter:model` → the provider and the model, as the conventions name them. */
function splitModel(spec: string | undefined): { provider?: string; model?: string } {
  if (spec === undefined) return {}
  const at = spec.indexOf(':')
  return at < 0 ? { model: spec } : { provider: spec.slice(0, at), model: spec.slice(at + 1) }
}

/** The name the conventions give the agent: the root is dsh; a child is named by the provider that made it. */
export function agentNameOf(header: Readonly<SessionHeader>): string {
  return header.parentSession === undefined && header.provider === undefined ? 'dsh' : (header.provider ?? 'subagent')
}

/** The spans of one session. `parent` is where its turns go: the delegating call's span, or a new trace. */
export class SessionSpans {
  private turn: Span | undefined
  private turnContext: Context = ROOT_CONTEXT
  private chat: Span | undefined
  private readonly tools = new Map<string, Span>()
  /** Ended tool spans, kept only when a stored tree is replayed (its children are read after it). */
  private readonly endedTools: Map<string, Span> | undefined
  private pendingInput: string[] = []
  private turnUsage = { input: 0, output: 0, model: undefined as string | undefined }
  private readonly name: string

  constructor(
    private readonly tracer: Tracer,
    private readonly header: Readonly<SessionHeader>,
    private readonly parent: Context,
    private readonly options: SessionSpansOptions,
  ) {
    this.name = agentNameOf(header)
    this.endedTools = options.keepEnded ? new Map() : undefined
  }

  /** The span a delegation from this session continues under: the tool call's, else the running turn's. */
  spanOf(toolCallId: string | undefined): Span | undefined {
    return (toolCallId !== undefined ? (this.tools.get(toolCallId) ?? this.endedTools?.get(toolCallId)) : undefined) ?? this.turn
  }

  event(event: SessionEvent): void {
    switch (event.type) {
      case 'turn/start': {
        this.close(event.ts, 'a new turn began')
        const header = this.header
        const attributes: Attributes = {
          [GEN_AI.operation]: 'invoke_agent',
          [GEN_AI.agentName]: this.name,
          [GEN_AI.agentId]: header.id,
          [GEN_AI.conversation]: header.id,
          [DSH.session]: header.id,
          [DSH.depth]: header.delegationDepth ?? 0,
          [DSH.turn]: event.turn,
        }
        if (header.parentSession !== undefined) attributes[DSH.parentSession] = header.parentSession
        if (header.provider !== undefined) attributes[DSH.subagentProvider] = header.provider
        if (header.origin !== undefined) attributes[DSH.origin] = header.origin
        if (header.label !== undefined) attributes[GEN_AI.agentDescription] = header.label
        this.turn = this.tracer.startSpan(`invoke_agent ${this.name}`, { kind: SpanKind.INTERNAL, startTime: event.ts, attributes }, this.parent)
        this.turnContext = trace.setSpan(this.parent, this.turn)
        this.turnUsage = { input: 0, output: 0, model: undefined }
        return
      }
      case 'step/start': {
        if (this.turn === undefined) return
        this.chat?.end(event.ts)
        this.chat = this.tracer.startSpan('chat', { kind: SpanKind.CLIENT, startTime: event.ts, attributes: { [GEN_AI.operation]: 'chat' } }, this.turnContext)
        this.pendingInput = []
        return
      }
      case 'user/message':
        if (this.options.captureContent) this.pendingInput.push(textOf(event.message.content))
        return
      case 'assistant/message': {
        const chat = this.chat
        if (chat === undefined) return
        this.chat = undefined
        const { provider, model } = splitModel(event.usage?.model)
        if (model !== undefined) {
          chat.updateName(`chat ${model}`)
          chat.setAttribute(GEN_AI.requestModel, model)
          chat.setAttribute(GEN_AI.responseModel, model)
        }
        if (provider !== undefined) chat.setAttribute(GEN_AI.provider, provider)
        if (event.usage) {
          chat.setAttribute(GEN_AI.inputTokens, event.usage.inputTokens)
          chat.setAttribute(GEN_AI.outputTokens, event.usage.outputTokens)
          if (event.usage.cacheHitInputTokens !== undefined) chat.setAttribute(GEN_AI.cacheReadTokens, event.usage.cacheHitInputTokens)
          this.turnUsage.input += event.usage.inputTokens
          this.turnUsage.output += event.usage.outputTokens
          this.turnUsage.model = event.usage.model ?? this.turnUsage.model
        }
        if (event.finish !== undefined) chat.setAttribute(GEN_AI.finishReasons, [event.finish])
        if (this.options.captureContent) {
          chat.setAttribute(GEN_AI.inputMessages, JSON.stringify(this.pendingInput.map((text) => ({ role: 'user', parts: [{ type: 'text', content: text }] }))))
          chat.setAttribute(GEN_AI.outputMessages, JSON.stringify([{ role: 'assistant', parts: [{ type: 'text', content: textOf(event.message.content) }], finish_reason: event.finish ?? 'stop' }]))
        }
        this.pendingInput = []
        chat.end(event.ts)
        return
      }
      case 'tool/call': {
        if (this.turn === undefined) return
        const { call } = event
        const attributes: Attributes = {
          [GEN_AI.operation]: 'execute_tool',
          [GEN_AI.toolName]: call.name,
          [GEN_AI.toolCallId]: call.id,
          [GEN_AI.toolType]: 'function',
        }
        // An MCP server's tool (mcp__<server>__<tool>): which server, to tell its calls apart from the process's own.
        const server = mcpServerOf(call.name)
        if (server !== undefined) attributes[DSH.mcpServer] = server
        if (this.options.captureContent) attributes[GEN_AI.toolArguments] = call.rawArgs ?? JSON.stringify(call.args ?? null)
        this.tools.set(call.id, this.tracer.startSpan(`execute_tool ${call.name}`, { kind: SpanKind.INTERNAL, startTime: event.ts, attributes }, this.turnContext))
        return
      }
      case 'tool/result': {
        const span = this.tools.get(event.result.callId)
        if (span === undefined) return
        this.tools.delete(event.result.callId)
        if (event.permission) {
          span.addEvent('dsh.permission', permissionAttributes(event.permission), event.ts)
        }
        if (event.result.isError) {
          span.setStatus({ code: SpanStatusCode.ERROR })
          span.setAttribute(GEN_AI.errorType, event.permission?.decision === 'reject' ? 'rejected' : 'tool_error')
        }
        if (this.options.captureContent) span.setAttribute(GEN_AI.toolResult, textOf(event.result.content))
        span.end(event.ts)
        this.endedTools?.set(event.result.callId, span)
        return
      }
      case 'turn/end': {
        const turn = this.turn
        if (turn === undefined) return
        const { reason } = event
        this.close(event.ts, reason === 'aborted' ? 'cancelled' : `the turn ended ${reason}`)
        turn.setAttribute(DSH.stopReason, reason)
        const { provider, model } = splitModel(this.turnUsage.model)
        if (provider !== undefined) turn.setAttribute(GEN_AI.provider, provider)
        if (model !== undefined) turn.setAttribute(GEN_AI.requestModel, model)
        turn.setAttribute(GEN_AI.inputTokens, this.turnUsage.input)
        turn.setAttribute(GEN_AI.outputTokens, this.turnUsage.output)
        // A turn's error text can quote a prompt, a tool's output or a model's answer: it is
        // content, exported only with capture on. Without, the span says only what kind of end it was.
        const errorText = this.options.captureContent ? event.error : undefined
        if (reason === 'aborted') turn.addEvent('dsh.cancelled', errorText !== undefined ? { reason: errorText } : {}, event.ts)
        else if (reason === 'error') {
          turn.setStatus({ code: SpanStatusCode.ERROR, ...(errorText !== undefined && { message: errorText.slice(0, 256) }) })
          turn.setAttribute(GEN_AI.errorType, 'error')
          turn.addEvent('exception', { 'exception.type': 'dsh.turn_error', ...(errorText !== undefined && { 'exception.message': errorText }) }, event.ts)
        } else if (reason !== 'completed') turn.addEvent('dsh.stopped', { reason }, event.ts)
        turn.end(event.ts)
        this.turn = undefined
        this.turnContext = ROOT_CONTEXT
        return
      }
      case 'approval':
        // A child without a session of its own asked: the decision is an event of the delegating turn.
        this.turn?.addEvent('dsh.approval', { ...permissionAttributes(event.permission), 'dsh.approval.tool': event.request.tool, 'dsh.approval.path': event.request.path.join(' > ') }, event.ts)
        return
      case 'hook/run':
        this.turn?.addEvent('dsh.hook', { 'dsh.hook.event': event.event, 'dsh.hook.command': event.command, 'dsh.hook.duration_ms': event.durationMs, ...(event.exitCode !== undefined && { 'dsh.hook.exit_code': event.exitCode }), ...(event.decision !== undefined && { 'dsh.hook.decision': event.decision }) }, event.ts)
        return
      case 'step/end':
      case 'input/queued':
      case 'input/taken':
        return
    }
  }

  /** End what is still open (a turn cut short: the session released, the process stopping), saying why. */
  close(at: number, why: string, turnToo = false): void {
    if (this.chat) {
      this.chat.addEvent('dsh.interrupted', { reason: why }, at)
      this.chat.end(at)
      this.chat = undefined
    }
    for (const span of this.tools.values()) {
      span.addEvent('dsh.interrupted', { reason: why }, at)
      span.end(at)
    }
    this.tools.clear()
    if (turnToo && this.turn) {
      this.turn.addEvent('dsh.interrupted', { reason: why }, at)
      this.turn.end(at)
      this.turn = undefined
    }
  }
}

/** A permission decision as span event attributes: never the call's arguments (content is not captured by default). */
function permissionAttributes(permission: ToolPermissionRecord): Attributes {
  const attributes: Attributes = { decision: permission.decision, by: permission.by }
  if (permission.source !== undefined) attributes['dsh.permission.source'] = permission.source
  if (permission.rule !== undefined) attributes['dsh.permission.rule'] = permission.rule
  return attributes
}
