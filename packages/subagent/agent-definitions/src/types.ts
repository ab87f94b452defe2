import type { PermissionLevel } from '@dsh/base'
import type { McpServerEntry } from './mcp-servers.js'
/** When a helper may, or must, run in the background. */
export type BackgroundPolicy = 'allowed' | 'always' | 'never'

/** Which kind of file a definition came from. */
export type DefinitionFlavour = 'dsh' | 'claude-code'

/** The front-matter fields of a dsh definition file. */
export const DEFINITION_FIELDS = ['name', 'description', 'provider', 'model', 'tools', 'disallowedTools', 'maxDepth', 'background', 'continuable', 'timeoutMs', 'maxOutputTokens', 'maxInputTokens', 'maxCost', 'maxChildren', 'maxWallTimeMs', 'permissions', 'workspace', 'sandbox', 'skills', 'mcpServers'] as const

export type DefinitionField = (typeof DEFINITION_FIELDS)[number]

/** One helper, as its file defines it, resolved: every default applied. */
export interface AgentDefinition {
  name: string
  /** When to use it: the parent's model reads this. One line. */
  description: string
  /** The `ctx.subagents` provider that runs it. */
  provider: string
  /** A model spec (`deepseek:deepseek-chat`); absent: the parent's. */
  model?: string
  /** Allow list of the child's tools (`tools`). */
  tools?: readonly string[]
  /** Deny list of the child's tools (`disallowedTools`). */
  disallowedTools?: readonly string[]
  /** Absolute delegation-depth bound the child runs under. */
  maxDepth?: number
  background: BackgroundPolicy
  /** The child is kept: the call returns its id, and the parent talks to it with send_message. */
  continuable: boolean
  /** How long one run may take before it is cancelled. */
  timeoutMs?: number
  /**
   * What one run and its descendants may use (`maxOutputTokens`, `maxInputTokens`,
   * `maxCost` by the prices table, `maxChildren` started below it, `maxWallTimeMs`): at a
   * limit the child is stopped, ends `budget`, and its parent reads which and how much.
   */
  budget?: { outputTokens?: number; inputTokens?: number; cost?: number; children?: number; wallTimeMs?: number }
  /**
   * The helper's permission rules (`permissions: { allow, ask, deny }`), a level of its
   * own under its parent's (see `@dsh/approvals`): they narrow what the tree above allows,
   * and never widen what it denies or asks about.
   */
  permissions?: PermissionLevel
  /** Where the helper works: its parent's directory (`shared`, the default), or a worktree or copy of its own. */
  workspace?: 'shared' | 'worktree' | 'copy'
  /** Its commands run confined (bubblewrap); `no-network` also cuts its network. */
  sandbox?: boolean | 'no-network'
  /**
   * The skills (`@dsh/skills`) the helper's child, and every agent below it, may use, by
   * name; absent: every skill its parent may use. It narrows, never widens.
   */
  skills?: readonly string[]
  /**
   * The MCP servers its child gets (`mcpServers:`): names of servers of the user's
   * `@dsh/mcp` config, or inline servers that `@dsh/mcp` starts for it. A server some helper
   * names is hidden from the helpers that do not name it.
   */
  mcpServers?: readonly McpServerEntry[]
  /** The file's body, trimmed: the child's instructions (its persona). Empty: none. */
  instructions: string
  /** Where it came from. */
  source: DefinitionSource
}

export interface DefinitionSource {
  /** The file's absolute path. */
  file: string
  /**
   * The directory's role: `project` (./.dsh/agents, or a directory named in config that is
   * inside the project), `claude-code` (./.claude/agents), `config` (a directory named in
   * config outside the project), `user` (~/.dsh/agents).
   */
  origin: 'project' | 'claude-code' | 'config' | 'user'
  flavour: DefinitionFlavour
  /** SHA-256 of the file's bytes, hex, the first 16 characters: recorded in the child's header. */
  hash: string
  /** The line of each field present, for errors found later (a provider that is not registered). */
  lines: Readonly<Partial<Record<DefinitionField, number>>>
}

/** What a load found: the definitions (names unique, first directory wins) and one-line notes. */
export interface DefinitionSet {
  definitions: readonly AgentDefinition[]
  /** Shadowed names, unmapped Claude Code fields and tool names, and the warnings: `FILE:LINE: …`. */
  notes: readonly string[]
  /**
   * What a used definition asked for and does not get, with what to change (a project's
   * `permissions.allow`): a host says these at every start, not only when asked.
   */
  warnings: readonly string[]
}
