import { mkdtempSync, rmSync } from 'node:fs'
import { tmpdir } from 'node:os'
import { join } from 'node:path'
import type { Agent } from '@dsh/agent'
import { DEFAULT_MAX_DEPTH } from '@dsh/subagent'
import type { Composition } from '../compose.js'

/** The tool-subagent defaults a preview child follows when its entry leaves them unset. */
const DEFAULT_TOOL_NAME = 'subagent'

interface ChildShape {
  tool: string
  persona?: string
  toolFilter?: { allow?: string[]; deny?: string[] }
  maxDepth?: number
}

/** What a child of the first configured subagent tool is given (persona, tool filter, depth bound). */
function firstChildShape(runtime: Composition): ChildShape | undefined {
  const entry = runtime.entries.find((candidate) => candidate.name === '@dsh/tool-subagent')
  if (!entry) return undefined
  const config = (entry.config ?? {}) as { toolName?: string; provider?: string; persona?: string; toolFilter?: ChildShape['toolFilter']; maxDepth?: number }
  const provider = runtime.ctx.get('subagents')?.getProvider(String(config.provider ?? ''))
  const maxDepth = config.maxDepth ?? (provider?.capabilities.depthLimit ? DEFAULT_MAX_DEPTH : undefined)
  return {
    tool: config.toolName ?? DEFAULT_TOOL_NAME,
    ...(config.persona !== undefined && { persona: config.persona }),
    ...(config.toolFilter && { toolFilter: config.toolFilter }),
    ...(maxDepth !== undefined && { maxDepth }),
  }
}

export function describe(runtime: Composition, agent: Agent, title: string): string {
  const composed = runtime.ctx.agents.composeSystemPrompt(agent)
  const failed = composed.failures.map((failure) => `\n(section "${failure.name}" failed and is left out: ${failure.error})`).join('')
  return `=== ${title}; sections: ${composed.parts.map((part) => part.name).join(', ') || 'none'} ===\n${composed.text}\n${failed}`
}

/**
 * The composed system prompt of a root agent and of a child of the first configured
 * subagent tool (its persona, tool filter and depth bound applied). The agents live in a
 * throwaway session directory so that a preview never adds sessions to the user's store.
 */
export async function previewPrompts(start: (sessionDir: string) => Promise<Composition>): Promise<string> {
  const sessionDir = mkdtempSync(join(tmpdir(), 'dsh-prompt-preview-'))
  try {
    const runtime = await start(sessionDir)
    try {
      const { agents } = runtime.ctx
      const root = await agents.create({ meta: { origin: 'config-check', cwd: process.cwd() } })
      const shape = firstChildShape(runtime)
      const child = await agents.create({
        parent: root,
        meta: { origin: 'subagent', parentSession: root.id, delegationDepth: 1, cwd: root.session.header.cwd, ...(shape?.maxDepth !== undefined && { maxDepth: shape.maxDepth }) },
        agentOptions: { ...(shape?.persona !== undefined && { persona: shape.persona }) },
        ...(shape?.toolFilter && { setup: (ctx, agent) => void ctx.tools.restrict(agent.id, shape.toolFilter!) }),
      })
      const childTitle = shape ? `child of tool "${shape.tool}" (depth 1)` : 'child (depth 1; no subagent tool is configured)'
      return `${describe(runtime, root, 'root agent')}\n${describe(runtime, child, childTitle)}`
    } finally {
      await runtime.dispose()
    }
  } finally {
    rmSync(sessionDir, { recursive: true, force: true })
  }
}
