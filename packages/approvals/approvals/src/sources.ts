/**
 * Verdict sources: what decides a call inside the broker besides its rules, before anyone
 * is asked (`@dsh/hooks`' `PreToolUse` hooks). One seam, consulted by `decide`, so there is
 * one decision per call: a source's `deny` refuses it, its `ask` makes it asked of the
 * front-end (as a rule that asks does), its `allow` is no objection (it never widens what a
 * rule denies or asks about, nor the default with nobody to ask).
 *
 * What the sources take travels down the tree as a permission level of `askUp` rules, so a
 * dsh process serving a subtree for this one (`dsh acp`, `dsh a2a serve`, `dsh worker`)
 * asks up for each such call, even where its rules would allow it, and the sources here
 * decide it on the forwarded request.
 */
import { errorMessage } from '@dsh/base'
import type { Agent } from '@dsh/agent'
import type { PermissionLevel } from '@dsh/session'
import type { ApprovalRequestInfo } from './types.js'

/** What a source says of one call; `undefined` is no opinion. */
export interface SourceVerdict {
  verdict: 'deny' | 'ask' | 'allow'
  /** Who said it, as the decision records it: `PreToolUse hook "guard.sh"`. */
  by: string
  /** Why: what the model reads for a `deny`, what the asker is shown for an `ask`. */
  reason?: string
}

/** One source of verdicts, added with `ctx.approvals.addVerdictSource`. */
export interface ApprovalVerdictSource {
  /** In a few words, for a failure's message: `the PreToolUse hooks`. */
  readonly name: string
  /**
   * Rules of the calls it may decide (`bash`, `mcp__github__*`, `*`), as permission rules
   * name tools: every child in another process carries them as an `askUp` level. Wider
   * than `takes` is safe (more is asked up), narrower is not.
   */
  readonly askUp: readonly string[]
  /** Whether it wants to see a call of `tool` (cheap: a call no source takes costs nothing more). */
  takes(tool: string): boolean
  /** Its verdict on one request (`agent` is the in-process agent the request belongs to). */
  verdict(request: ApprovalRequestInfo, agent: Agent, signal: AbortSignal): Promise<SourceVerdict | undefined> | SourceVerdict | undefined
}

const STRICTNESS: Readonly<Record<SourceVerdict['verdict'], number>> = { allow: 0, ask: 1, deny: 2 }

/** The level every child started here carries for the sources' calls. */
export const ASK_UP_LEVEL_FROM = 'verdict sources (PreToolUse hooks)'

export class VerdictSources {
  private list: readonly ApprovalVerdictSource[] = []
  private level: PermissionLevel | undefined

  add(source: ApprovalVerdictSource): () => void {
    this.list = [...this.list, source]
    this.level = undefined
    return () => {
      this.list = this.list.filter((entry) => entry !== source)
      this.level = undefined
    }
  }

  get size(): number {
    return this.list.length
  }

  /** Whether any source takes a call of `tool`. */
  takes(tool: string): boolean {
    for (const source of this.list) if (safeTakes(source, tool)) return true
    return false
  }

  /** The `askUp` level of every source's rules, for the children (`undefined` without sources). */
  askUpLevel(): PermissionLevel | undefined {
    if (this.list.length === 0) return undefined
    this.level ??= { from: ASK_UP_LEVEL_FROM, askUp: [...new Set(this.list.flatMap((source) => source.askUp))] }
    return this.level
  }

  /**
   * Every source that takes the call, at once; the strictest verdict wins (`deny`, then
   * `ask`, then `allow`). A source that fails denies, saying so: a guard that could not
   * look never lets a call through.
   */
  async verdict(request: ApprovalRequestInfo, agent: Agent, signal: AbortSignal): Promise<SourceVerdict | undefined> {
    const taking = this.list.filter((source) => safeTakes(source, request.tool))
    if (taking.length === 0) return undefined
    const said = await Promise.all(
      taking.map(async (source): Promise<SourceVerdict | undefined> => {
        try {
          return await source.verdict(request, agent, signal)
        } catch (error) {
          return { verdict: 'deny', by: source.name, reason: `${source.name} could not decide it: ${errorMessage(error)}` }
        }
      }),
    )
    let strictest: SourceVerdict | undefined
    for (const verdict of said) if (verdict !== undefined && (strictest === undefined || STRICTNESS[verdict.verdict] > STRICTNESS[strictest.verdict])) strictest = verdict
    return strictest
  }
}

function safeTakes(source: ApprovalVerdictSource, tool: string): boolean {
  try {
    return source.takes(tool)
  } catch {
    // A source that cannot tell takes it: it then decides (or its failure denies).
    return true
  }
}
