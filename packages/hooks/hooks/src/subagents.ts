/**
 * `SubagentStart` and `SubagentStop` for the whole tree: the subagent lifecycle of this
 * process (`subagent/start`, `subagent/end` of `@dsh/subagent`, in-process and remote
 * children alike) and the descendants a remote child names below it (`subagent/descendant`,
 * which the ACP, A2A and queue providers emit for what a `dsh acp`, `dsh a2a serve` or
 * `dsh worker` reports, checked by `@dsh/subagent`'s `remote/descendants.ts`). Both are
 * heard by name: this package loads neither, so their shapes are restated here.
 */
import type { Context } from 'cordis'
import { delegationName } from '@dsh/approvals'
import type { Session } from '@dsh/session'
import type { AgentFacts } from './agent-facts.js'
import type { HookRunner } from './fire.js'

interface RunInfo {
  id: string
  parentId: string
  provider: string
  label?: string
  helper?: string
  stopReason?: string
}

/** The `subagent/descendant` event (`@dsh/subagent`'s `remote/descendants.ts`), by shape. */
interface DescendantInfo {
  parentId: string
  provider: string
  label?: string
  childHelper?: string
  event: 'start' | 'end'
  id: string
  path: string[]
  helper?: string
  stopReason?: string
}

export function fireSubagentEvents(ctx: Context, runner: HookRunner, facts: (session: Session) => AgentFacts): void {
  const on = ctx.on.bind(ctx) as unknown as (event: string, listener: (info: never) => void) => () => void
  /** Who an agent below `parentId` is: its own session's facts when it is here, else its parent's with its id, helper and path below. */
  const below = (parentId: string, id: string, names: string[], helper: string | undefined): AgentFacts | undefined => {
    const own = ctx.sessions.get(id)
    if (own !== undefined) return facts(own)
    const parent = ctx.sessions.get(parentId)
    if (parent === undefined) return undefined
    const { agentType: _parentType, ...known } = facts(parent)
    return { ...known, agentId: id, ...(helper !== undefined && { agentType: helper }), agentPath: [known.agentPath, ...names].join('/') }
  }
  // Recorded in the session of the agent of this process that started the child (or the remote child it came through): the child's may be gone.
  const fire = (event: 'start' | 'end', who: AgentFacts | undefined, stopReason: string | undefined, recordIn: string) => {
    if (who === undefined) return
    if (event === 'start') void runner.fire('SubagentStart', who, {}, undefined, undefined, undefined, recordIn)
    else void runner.fire('SubagentStop', who, { stop_reason: stopReason, stop_hook_active: false }, undefined, undefined, undefined, recordIn)
  }
  const run = (event: 'start' | 'end') => (info: RunInfo) => fire(event, below(info.parentId, info.id, [delegationName(info)], info.helper), info.stopReason, info.parentId)
  on('subagent/start', run('start'))
  on('subagent/end', run('end'))
  on('subagent/descendant', (info: DescendantInfo) => fire(info.event, below(info.parentId, info.id, [delegationName({ provider: info.provider, label: info.label, helper: info.childHelper }), ...info.path], info.helper), info.stopReason, info.parentId))
}
