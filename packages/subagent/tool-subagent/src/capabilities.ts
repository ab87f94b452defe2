/**
 * What this package asks of a provider's capabilities, all through `@dsh/subagent`'s one
 * capability check (`firstUnsupportedFeature`, the one `ctx.subagents` refuses a request
 * by): a tool's config and a helper's definition are checked by what they will request.
 */
import { DEFAULT_MAX_DEPTH, firstUnsupportedFeature, type SubagentProvider } from '@dsh/subagent'

/**
 * The depth bound a tool's requests carry: its config's, else the default bound where the
 * provider can enforce one (a provider that cannot is not asked for a bound it would refuse).
 */
export function toolDepthBound(configured: number | undefined, provider: Pick<SubagentProvider, 'capabilities'> | undefined): number | undefined {
  if (configured !== undefined || provider === undefined) return configured
  return firstUnsupportedFeature(DEFAULT_BOUND, provider.capabilities) === undefined ? DEFAULT_MAX_DEPTH : undefined
}

const DEFAULT_BOUND = Object.freeze({ maxDepth: DEFAULT_MAX_DEPTH })
