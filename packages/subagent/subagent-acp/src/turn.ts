/**
 * One ACP turn: the provider's turn file. The message is one `session/prompt` on the
 * child's session; the agent's `agent_message_chunk` text is folded into the output (and
 * its updates into progress) until the prompt's stop reason, or its error, settles the
 * turn; `session/cancel` asks it to stop. How the turn ends otherwise (cancel grace,
 * timeout, the process exiting) is `@dsh/subagent`'s remote lifecycle.
 */
import type { PromptResponse } from '@agentclientprotocol/sdk'
import { isRecord, printable, stopReasonOfAcp, type StopReason } from '@dsh/base'
import type { TextBlock } from '@dsh/llm'
import { EXIT_DRAIN_MS, selectOutput, type RemoteTurn, type SubagentResult, type SubagentUsage, type TurnControl } from '@dsh/subagent'
import type { AcpRunSpec } from './config.js'
import type { AcpChild } from './child.js'
import { AcpProgressReader, usageOfPromptResponse } from './progress.js'
import { readDescendant } from './descendant.js'
import { describeRpcError, isRpcError } from './rpc-error.js'

export class AcpTurn implements RemoteTurn<AcpChild> {
  private streamed = ''
  private usage: SubagentUsage | undefined
  private readonly progress: AcpProgressReader

  constructor(
    private readonly spec: AcpRunSpec,
    private readonly message: TextBlock[],
    private readonly turn: TurnControl,
  ) {
    this.progress = new AcpProgressReader(turn, (reason) => spec.progressDropped?.(reason))
  }

  async deliver(child: AcpChild): Promise<void> {
    const { turn } = this
    const sessionId = child.remoteId!
    turn.accepted()
    try {
      const response = await child.prompt(sessionId, this.message.map((block) => ({ type: 'text' as const, text: block.text })), (update) => {
        if (turn.settled) return
        if (update.sessionUpdate === 'agent_message_chunk' && update.content.type === 'text') this.streamed += update.content.text
        this.progress.read(update)
        // A dsh acp child names its descendants' starts and ends on the call their branch hangs under.
        if (update.sessionUpdate === 'tool_call_update' && this.spec.descendant !== undefined) {
          const descendant = readDescendant(update._meta, (reason) => this.spec.progressDropped?.(reason))
          if (descendant !== undefined) this.spec.descendant(descendant)
        }
      })
      this.usage = usageOfPromptResponse(response, (reason) => this.spec.progressDropped?.(reason))
      if (this.usage) turn.report({ kind: 'usage', usage: this.usage })
      const stopReason = stopReasonOfAcp(response.stopReason)
      // A dsh child stopped by the budget it was handed says so beside ACP's stop reason.
      const budget = budgetStopOf(response)
      if (budget !== undefined) turn.settle(this.result('budget', budget))
      else if (stopReason === 'completed') turn.settle(this.result(stopReason, undefined))
      else if (stopReason === 'aborted') turn.settle(this.result(stopReason, `the ${turn.scope} was cancelled`))
      else turn.settle(this.result(stopReason, `the ACP agent ended its turn with stop reason "${response.stopReason}"`))
    } catch (error) {
      if (turn.settled) return
      if (turn.stopping === 'cancelled') return turn.settle(this.result('aborted', `the ${turn.scope} was cancelled`))
      // An error answer is the agent's verdict; anything else is the connection going
      // away, most likely because the process died: the lifecycle's exit watch reports that.
      if (isRpcError(error)) return turn.settle(this.result('error', turn.withStderr(`session/prompt failed: ${describeRpcError(error)}`)))
      // We cut the connection over an oversized frame: that is the reason, whatever the
      // agent does next (closing its input usually makes it exit at once, and the exit
      // watch must not report that exit as the cause).
      const oversized = child.oversizedFrame
      if (oversized !== undefined) return turn.fail(turn.withStderr(oversized))
      if (!(await child.tree.exitWithin(EXIT_DRAIN_MS))) turn.fail(turn.withStderr(`session/prompt failed: ${describeRpcError(error)}`))
    }
  }

  interrupt(child: AcpChild): void {
    // Permission asks from now on are answered `cancelled`: the turn is being stopped.
    child.stopping = true
    if (child.remoteId !== undefined) child.cancel(child.remoteId)
  }

  detach(child: AcpChild): void {
    child.stopping = false
  }

  result(stopReason: StopReason, diagnostic: string | undefined): SubagentResult {
    const result: SubagentResult = { output: selectOutput([], this.streamed), stopReason }
    if (diagnostic !== undefined) result.diagnostic = diagnostic
    if (this.usage) result.usage = this.usage
    return result
  }
}

/** The diagnostic of a `dsh acp` turn stopped by its budget (`_meta.dsh.stopReason: budget`), if it was. */
function budgetStopOf(response: PromptResponse): string | undefined {
  const meta = response._meta
  const dsh = isRecord(meta) ? meta.dsh : undefined
  if (!isRecord(dsh) || dsh.stopReason !== 'budget') return undefined
  return typeof dsh.diagnostic === 'string' ? printable(dsh.diagnostic.slice(0, 1000)) : 'budget: the ACP child was stopped by its budget'
}
