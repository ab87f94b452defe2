import type { Context } from 'cordis'
import Schema from 'schemastery'
import { errorMessage } from '@dsh/base'
import { SubagentError } from '@dsh/subagent'

export const REPORT_TOOL = 'report'

/**
 * A child-scoped `report(output)` tool in every continuable child (never in roots,
 * one-shot or remote children): the child hands the agent that started it an
 * intermediate result and keeps working. The parent reads it at its next step (an idle
 * parent starts a turn for it). A child's tool filter never hides it.
 */
export class SubagentReportPlugin {
  static inject = ['subagents']
  static Config: Schema<SubagentReportPlugin.Config> = Schema.object({})

  constructor(ctx: Context) {
    const subagents = ctx.subagents
    subagents.registerContinuableSetup((childCtx, child) => {
      childCtx.tools.register<{ output: string }>({
        name: REPORT_TOOL,
        description: 'Hand the agent that started you an intermediate result now, while you keep working. Your final answer reaches it anyway when your turn ends.',
        parameters: {
          type: 'object',
          properties: { output: { type: 'string', minLength: 1, description: 'The result to report.' } },
          required: ['output'],
          additionalProperties: false,
        },
        execute: (args) => {
          try {
            const id = subagents.reportFrom(child, args.output)
            return `report accepted by the agent that started you as message ${id}`
          } catch (error) {
            if (error instanceof SubagentError) return { isError: true, content: `report not delivered: ${errorMessage(error)}` }
            throw error
          }
        },
      })
      return [REPORT_TOOL]
    })
  }
}

export namespace SubagentReportPlugin {
  export interface Config {}
}
