/**
 * The plugins the CLI ships, each behind its own `import()`. An entry naming one of these
 * packages loads it through this table instead of resolving it on disk, for two reasons:
 *
 * - In the bundled CLI every lazy `import()` here becomes its own chunk, so a composition
 *   parses and runs only the plugins it lists (the OpenAI SDK only when `@dsh/llm-openai`
 *   is composed, the ACP SDK only for `@dsh/subagent-acp`, and so on).
 * - The bundle holds one copy of each package: a plugin loaded from disk would bring a
 *   second `@dsh/llm` or `@dsh/subagent`, whose classes and services are not the ones the
 *   rest of the composition uses.
 *
 * Any other name (a user's own plugin, a path) is resolved and imported from disk.
 */
export const shippedPlugins: Readonly<Record<string, () => Promise<unknown>>> = {
  '@dsh/llm': () => import('@dsh/llm'),
  '@dsh/session': () => import('@dsh/session'),
  '@dsh/tools': () => import('@dsh/tools'),
  '@dsh/approvals': () => import('@dsh/approvals'),
  '@dsh/agent-loop': () => import('@dsh/agent-loop'),
  '@dsh/agent': () => import('@dsh/agent'),
  '@dsh/llm-scripted': () => import('@dsh/llm-scripted'),
  '@dsh/llm-openai': () => import('@dsh/llm-openai'),
  '@dsh/llm-anthropic': () => import('@dsh/llm-anthropic'),
  '@dsh/llm-replay': () => import('@dsh/llm-replay'),
  '@dsh/session-jsonl': () => import('@dsh/session-jsonl'),
  '@dsh/subagent': () => import('@dsh/subagent'),
  '@dsh/subagent-spawn': () => import('@dsh/subagent-spawn'),
  '@dsh/subagent-fork': () => import('@dsh/subagent-fork'),
  '@dsh/subagent-acp': () => import('@dsh/subagent-acp'),
  '@dsh/subagent-a2a': () => import('@dsh/subagent-a2a'),
  '@dsh/subagent-queue': () => import('@dsh/subagent-queue'),
  '@dsh/subagent-codex': () => import('@dsh/subagent-codex'),
  '@dsh/subagent-claude-code': () => import('@dsh/subagent-claude-code'),
  '@dsh/tool-subagent': () => import('@dsh/tool-subagent'),
  '@dsh/agent-definitions': () => import('@dsh/agent-definitions'),
  '@dsh/tool-subagent-control': () => import('@dsh/tool-subagent-control'),
  '@dsh/tool-subagent-report': () => import('@dsh/tool-subagent-report'),
  '@dsh/tasks': () => import('@dsh/tasks'),
  '@dsh/tool-tasks': () => import('@dsh/tool-tasks'),
  '@dsh/bash': () => import('@dsh/bash'),
  '@dsh/tool-bash': () => import('@dsh/tool-bash'),
  '@dsh/tool-files': () => import('@dsh/tool-files'),
  '@dsh/tracing': () => import('@dsh/tracing'),
  '@dsh/workspaces': () => import('@dsh/workspaces'),
  '@dsh/tool-workspace': () => import('@dsh/tool-workspace'),
  '@dsh/skills': () => import('@dsh/skills'),
  '@dsh/tool-skill': () => import('@dsh/tool-skill'),
  '@dsh/mcp': () => import('@dsh/mcp'),
  '@dsh/hooks': () => import('@dsh/hooks'),
}
