import { isAbsolute, resolve } from 'node:path'
import type { Context } from 'cordis'
import {
  NO_CAPABILITIES,
  refuseDisposedParent,
  refuseUnstartable,
  SubagentError,
  type ContinuablePreparation,
  type PrepareContinuableRequest,
  type RemoteChildRecord,
  type RemoteConversation,
  type SubagentCapabilities,
  type SubagentProvider,
  type SubagentRequest,
  type SubagentRun,
} from '@dsh/subagent'
import { newSessionRequest, startAcpRun } from './acp-run.js'
import { AcpProviderConfig, resolveAcpSpec, withRecordingGrant, type AcpRunSpec } from './config.js'
import { AcpChild } from './continuable/acp-child.js'
import { AcpConversation } from './continuable/conversation.js'
import { refuseOversizedPrompt } from './frame-limit.js'

/**
 * Of the start-time features only the depth bound: it is checked here before anything is
 * spawned, and travels in `_meta.dsh` so a dsh child applies it to its own children.
 */
export const ACP_CAPABILITIES: Readonly<SubagentCapabilities> = Object.freeze({ ...NO_CAPABILITIES, depthLimit: true })

/**
 * An ACP agent process per delegation. Out of process: no local agent, and the child
 * never sees the parent's conversation. Continuable when the agent advertises
 * `loadSession`: the session stays open while the process lives, and is reopened with
 * `session/load` in a new process after a restart.
 */
export class AcpProvider implements SubagentProvider {
  readonly capabilities = ACP_CAPABILITIES
  readonly inheritsParentContext = false

  constructor(readonly name: string, private readonly spec: AcpRunSpec) {}

  start(request: SubagentRequest): Promise<SubagentRun> {
    return startAcpRun(this.spec, request)
  }

  async prepareContinuable({ parent, descriptor, request, signal }: PrepareContinuableRequest): Promise<ContinuablePreparation> {
    // The same request a one-shot start would make, so it is refused in the same words.
    const oneShot: SubagentRequest = { prompt: request.prompt, parent, signal, label: descriptor.label, ...(request.maxDepth !== undefined && { maxDepth: request.maxDepth }) }
    if (request.agentOptions?.model !== undefined) {
      throw new SubagentError('INVALID_REQUEST', `the "${this.name}" subagent provider cannot choose the model of an ACP agent (asked for "${request.agentOptions.model}"); choose it in the provider's command or args (e.g. dsh acp --model SPEC) and drop agentOptions.model`)
    }
    refuseUnstartable(oneShot, 'the ACP agent')
    refuseOversizedPrompt(this.name, request.prompt, this.spec.maxFrameBytes)
    const cwd = this.spec.cwd ?? resolve(parent.session.header.cwd)
    const recording = this.spec.recordingLink?.(parent.id, request.callId)
    const { child, sessionId } = await AcpChild.launch(withRecordingGrant(this.spec, recording), cwd, signal, (opening) => opening.newSession(newSessionRequest(cwd, oneShot, this.name, recording)))
    try {
      // The parent began disposing while the agent started: the child would outlive it.
      refuseDisposedParent(parent)
    } catch (error) {
      await child.close()
      throw error
    }
    return { kind: 'remote', conversation: new AcpConversation(this.spec, sessionId, { cwd, parentSession: parent.id, depth: parent.depth + 1 }, child) }
  }

  /**
   * Reopen a record an earlier process wrote: the agent is started again and the session
   * reloaded with `session/load`, all before this resolves (a child that cannot come back
   * says so now, with nothing left running).
   */
  async resumeContinuable(record: RemoteChildRecord, signal: AbortSignal): Promise<RemoteConversation> {
    const cwd = record.resumeData?.cwd
    if (typeof cwd !== 'string' || !isAbsolute(cwd)) {
      throw new SubagentError('INVALID_REQUEST', `the record of ACP child ${record.childId} has no absolute cwd in its resumeData (got ${JSON.stringify(cwd)}); it was not written by this provider`)
    }
    const conversation = new AcpConversation(this.spec, record.remoteId, { cwd, parentSession: record.parentId, depth: record.depth }, undefined)
    await conversation.reconnect(signal)
    return conversation
  }
}

/** Registers an `AcpProvider` on `ctx.subagents` under `providerName`. */
export class AcpPlugin {
  static inject = ['subagents']
  static Config = AcpProviderConfig

  constructor(ctx: Context, config: AcpProviderConfig) {
    const log = ctx.logger('subagent-acp')
    ctx.subagents.registerProvider(
      new AcpProvider(config.providerName, {
        ...resolveAcpSpec(config),
        recordingLink: (parent, callId) => ctx.get('llm')?.childRecordingLink(parent, callId),
        progressDropped: (reason) => log.debug('a progress update from the ACP agent was dropped: %s', reason),
      }),
    )
  }
}
