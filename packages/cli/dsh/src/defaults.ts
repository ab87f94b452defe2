import { join, resolve } from 'node:path'
import type { PluginEntry } from './compose.js'
import { dshHome } from './config-file.js'
import { tracingEntries } from './tracing-entry.js'

export interface CommandLineSettings {
  sessionDir?: string
  model?: string
  record?: string
  lineageRoot?: string
}

/** What every `dsh` command composes before a user's config. */
export function defaultEntries(options: CommandLineSettings): PluginEntry[] {
  const entries: PluginEntry[] = [
    { id: 'llm', name: '@dsh/llm', config: options.model ? { model: options.model } : {} },
    { id: 'sessions', name: '@dsh/session' },
    { id: 'tools', name: '@dsh/tools' },
    // Every side effect anywhere in the tree is decided here (rules, then whoever the command lets ask).
    { id: 'approvals', name: '@dsh/approvals' },
    { id: 'agent-loop', name: '@dsh/agent-loop' },
    { id: 'agents', name: '@dsh/agent' },
    { id: 'llm-scripted', name: '@dsh/llm-scripted' },
    { id: 'llm-deepseek', name: '@dsh/llm-openai' },
    {
      id: 'llm-openai',
      name: '@dsh/llm-openai',
      config: { name: 'openai', baseURL: 'https://api.openai.com/v1', model: 'gpt-4.1', apiKeyEnv: 'OPENAI_API_KEY' },
    },
    // `anthropic:<model>`; its SDK is imported on the first request, so other runs never load it.
    { id: 'llm-anthropic', name: '@dsh/llm-anthropic' },
    {
      id: 'llm-replay',
      name: '@dsh/llm-replay',
      config: { ...(options.record !== undefined && { record: options.record }), ...(options.lineageRoot !== undefined && { lineageRoot: options.lineageRoot }) },
    },
    { id: 'session-jsonl', name: '@dsh/session-jsonl', config: { dir: options.sessionDir ?? defaultSessionDir() } },
    { id: 'subagents', name: '@dsh/subagent' },
    { id: 'subagent-spawn', name: '@dsh/subagent-spawn' },
    { id: 'subagent-fork', name: '@dsh/subagent-fork' },
    { id: 'tool-subagent', name: '@dsh/tool-subagent', config: { provider: 'spawn' } },
    { id: 'tool-subagent-control', name: '@dsh/tool-subagent-control' },
    { id: 'tool-subagent-report', name: '@dsh/tool-subagent-report' },
    { id: 'tasks', name: '@dsh/tasks' },
    { id: 'tool-tasks', name: '@dsh/tool-tasks' },
    { id: 'bash', name: '@dsh/bash' },
    { id: 'tool-bash', name: '@dsh/tool-bash' },
    // read, write, edit, glob, grep, ls: confined to each agent's cwd; write and edit go to the broker.
    { id: 'tool-files', name: '@dsh/tool-files' },
    // SKILL.md folders of ./.dsh/skills and ~/.dsh/skills: listed in each agent's prompt, loaded by the skill tool (none found: no tool).
    { id: 'skills', name: '@dsh/skills' },
    { id: 'tool-skill', name: '@dsh/tool-skill' },
    ...tracingEntries(),
  ]
  return entries
}

/**
 * What the command line says, merged over the user's config as well as under it: a flag
 * the user typed (`--model`, `--session-dir`, `--record`) wins over the file, whose
 * settings are the defaults of every run.
 */
export function commandLineEntries(options: CommandLineSettings): PluginEntry[] {
  const entries: PluginEntry[] = []
  if (options.model) entries.push({ id: 'llm', name: '@dsh/llm', config: { model: options.model } })
  if (options.sessionDir !== undefined) entries.push({ id: 'session-jsonl', name: '@dsh/session-jsonl', config: { dir: options.sessionDir } })
  if (options.record !== undefined) entries.push({ id: 'llm-replay', name: '@dsh/llm-replay', config: { record: options.record } })
  return entries
}

/**
 * `$DSH_SESSION_DIR` (a dsh that started this one put its own there), else
 * `$DSH_HOME/sessions`, else `~/.dsh/sessions`.
 */
export function defaultSessionDir(env: NodeJS.ProcessEnv = process.env): string {
  return env.DSH_SESSION_DIR ? resolve(env.DSH_SESSION_DIR) : join(dshHome(env), 'sessions')
}

/**
 * Hand the session directory this composition stores in to every process it starts: a
 * `dsh acp` child, or a dsh a command runs, stores its sessions beside its parent's (unless
 * its own `--session-dir` says otherwise), so `dsh sessions tree` finds the whole tree in
 * one place. `DSH_SESSION_DIR` is in `@dsh/process`'s base environment, like `DSH_HOME`.
 */
export function exportSessionDir(entries: readonly PluginEntry[], env: NodeJS.ProcessEnv = process.env): void {
  const dir = entries.find((entry) => entry.id === 'session-jsonl')?.config?.dir
  if (typeof dir === 'string' && dir !== '') env.DSH_SESSION_DIR = resolve(dir)
}
