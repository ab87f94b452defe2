import Schema from 'schemastery'
import type { Agent } from '@dsh/agent'
import type { ApprovalService } from '@dsh/approvals'
import { SubagentError, type DescendantEvent } from '@dsh/subagent'

/** The plugin's config, as written in a composition file. The token itself never appears here. */
export interface A2aProviderConfig {
  providerName: string
  urls: string[]
  tokenEnv?: string
  timeoutMs?: number
}

const baseUrl = Schema.string().pattern(/^https?:\/\/[^\s]+$/).description('An A2A agent base URL (its card is at /.well-known/agent-card.json under it).')

export const A2aProviderConfig: Schema<A2aProviderConfig> = Schema.object({
  providerName: Schema.string().min(1).default('a2a').description('The name the provider registers under on ctx.subagents.'),
  urls: Schema.array(baseUrl).min(1).required().description('One or more worker base URLs; runs go to the least busy one that answers.'),
  tokenEnv: Schema.string().pattern(/^[A-Za-z_][A-Za-z0-9_]*$/).description('The environment variable holding the bearer token every request carries.'),
  timeoutMs: Schema.natural().min(1).description('Longest a run may take, from its start; on expiry it ends error and the worker is asked to cancel.'),
}) as Schema<A2aProviderConfig>

/** Everything a run needs, defaults applied and the token read once. */
export interface A2aRunSpec {
  provider: string
  urls: readonly string[]
  /** The bearer token, read from `tokenEnv` at load. */
  token: string | undefined
  /** The variable the token came from, named when a worker refuses it. */
  tokenEnv: string | undefined
  timeoutMs: number | undefined
  /** Told why a progress update from the worker was dropped; the plugin logs it at debug level. */
  progressDropped?: (reason: string) => void
  /** The parent's approval broker, asked for what a worker's `input-required` asks (`approvals.ts`); none: every request is rejected. */
  approvals?: () => ApprovalService | undefined
  /** A live agent of this process by id (a resumed child's parent). */
  agent?: (id: string) => Agent | undefined
  /** The plugin's: told of the descendants a dsh worker names (`metadata.dsh.descendants`) with the child they came through; emitted as `subagent/descendant`. */
  descendantBelow?: (info: DescendantEvent) => void
}

/**
 * The one place config meets the environment: a named token variable that is unset or
 * empty fails the load (a worker would refuse every run with 401 otherwise).
 */
export function resolveA2aSpec(config: A2aProviderConfig, env: NodeJS.ProcessEnv = process.env): A2aRunSpec {
  const urls = config.urls.map((url) => url.replace(/\/+$/, ''))
  const duplicate = urls.find((url, index) => urls.indexOf(url) !== index)
  if (duplicate) throw new SubagentError('INVALID_CONFIG', `subagent-a2a: urls lists ${duplicate} twice; list each worker once`)
  for (const url of urls) {
    try {
      new URL(url)
    } catch {
      throw new SubagentError('INVALID_CONFIG', `subagent-a2a: urls has ${JSON.stringify(url)}, which is not a URL; write it like http://10.0.0.2:7700`)
    }
  }
  let token: string | undefined
  if (config.tokenEnv !== undefined) {
    token = env[config.tokenEnv]
    if (!token) throw new SubagentError('INVALID_CONFIG', `subagent-a2a: tokenEnv names ${config.tokenEnv}, which is not set (or empty); export the workers' bearer token in it`)
  }
  return { provider: config.providerName, urls, token, tokenEnv: config.tokenEnv, timeoutMs: config.timeoutMs }
}
