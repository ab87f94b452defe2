/**
 * The hooks entry is handed the project hook files the user trusted in this directory
 * (`dsh trust`'s record, `config-trust.ts`): its `trustedProjectFiles`, which no config file
 * sets (a value written there is replaced), so `projectClaudeSettings` / `projectCodexHooks`
 * in the user's own config run a project's hooks only where, and as, the user trusted them.
 */
import type { PluginEntry } from './config-entries.js'
import { projectHookTrust } from './config-trust.js'

export function withProjectHookTrust(entries: PluginEntry[], home: string, cwd = process.cwd()): PluginEntry[] {
  if (!entries.some((entry) => entry.name === '@dsh/hooks' && !entry.disabled)) return entries
  const trusted = projectHookTrust(home, cwd)
  return entries.map((entry) => (entry.name === '@dsh/hooks' ? { ...entry, config: { ...(entry.config ?? {}), trustedProjectFiles: trusted } } : entry))
}
