import { existsSync } from 'node:fs'
import { dirname, join } from 'node:path'
import { errorMessage } from '@dsh/base'
import type { Agent } from './types.js'
import { AgentError } from './errors.js'

/**
 * One named part of the system prompt, contributed by a plugin (`ctx.agents.addPromptSection`).
 * Sections are rendered in ascending `order` (ties by name), joined by blank lines.
 */
export interface PromptSection {
  /** Unique among registered sections; names the section in logs and in `dsh config check --prompt`. */
  readonly name: string
  /** Position: lower first. Core uses 0 (persona) and 10 (environment); tool guidance 100 and up. */
  readonly order: number
  /** Rendered only for agents that can see this tool (tool filters, scoped tools). */
  readonly tool?: string
  /** Rendered only when this returns true (e.g. false once the delegation depth bound is reached). */
  visible?(agent: Agent): boolean
  /**
   * The section's text, or nothing to leave it out. Must be a pure function of the agent
   * and the plugin's config: the composed prompt is cached per agent and must not change
   * between turns (providers cache prompt prefixes byte for byte).
   */
  render(agent: Agent): string | undefined
}

/** Order of the sections `@dsh/agent` contributes itself. */
export const PERSONA_ORDER = 0
export const ENVIRONMENT_ORDER = 10

/** A section that could not be rendered; the prompt is composed without it. */
export interface SectionFailure {
  name: string
  error: string
}

export function checkSection(section: PromptSection): void {
  if (typeof section?.name !== 'string' || !section.name.trim()) throw new AgentError('INVALID_OPTIONS', 'a prompt section needs a non-empty name')
  if (typeof section.order !== 'number' || !Number.isFinite(section.order)) throw new AgentError('INVALID_OPTIONS', `prompt section "${section.name}" needs a finite numeric order`)
  if (typeof section.render !== 'function') throw new AgentError('INVALID_OPTIONS', `prompt section "${section.name}" needs a render function`)
}

/** The rendered parts of an agent's prompt, in order, and the sections that threw. */
export interface ComposedPrompt {
  text: string
  parts: { name: string; text: string }[]
  failures: SectionFailure[]
}

/** Sections in render order: ascending `order`, ties by name. */
export function sortSections(sections: readonly PromptSection[]): PromptSection[] {
  return [...sections].sort((a, b) => a.order - b.order || (a.name < b.name ? -1 : a.name > b.name ? 1 : 0))
}

/** Render `ordered` (already sorted, see `sortSections`) for `agent`, which sees `visibleTools`. */
export function composePrompt(ordered: readonly PromptSection[], agent: Agent, visibleTools: readonly string[]): ComposedPrompt {
  const parts: { name: string; text: string }[] = []
  const failures: SectionFailure[] = []
  for (const section of ordered) {
    if (section.tool !== undefined && !visibleTools.includes(section.tool)) continue
    try {
      if (section.visible && !section.visible(agent)) continue
      const text = section.render(agent)?.trim()
      if (text) parts.push({ name: section.name, text })
    } catch (error) {
      failures.push({ name: section.name, error: errorMessage(error) })
    }
  }
  const text = parts.map((part) => part.text).join('\n\n')
  const shared = sharedComposition(text, parts)
  return { text: shared.text, parts: shared.parts, failures }
}

/** Most distinct compositions remembered for sharing; past it the memory starts over. */
const SHARED_COMPOSITIONS_LIMIT = 64
const sharedCompositions = new Map<string, { text: string; parts: { name: string; text: string }[] }>()

/**
 * The text and parts of an earlier identical composition, when there is one: the children
 * of a fan-out share one prompt (same persona, directory, day and tools), and a thousand
 * live children should hold one copy of it, not a thousand. Shared parts are frozen.
 */
function sharedComposition(text: string, parts: { name: string; text: string }[]): { text: string; parts: { name: string; text: string }[] } {
  const known = sharedCompositions.get(text)
  if (known && known.parts.length === parts.length && known.parts.every((part, index) => part.name === parts[index]!.name)) return known
  if (sharedCompositions.size >= SHARED_COMPOSITIONS_LIMIT) sharedCompositions.clear()
  const entry = { text, parts: Object.freeze(parts.map((part) => Object.freeze(part))) as { name: string; text: string }[] }
  sharedCompositions.set(text, entry)
  return entry
}

/** How long a directory's git answer is reused before the file system is asked again. */
const GIT_CHECK_REUSE_MS = 1000
/** Directories checked recently; cleared when it grows past `GIT_CHECK_LIMIT` entries. */
const gitChecks = new Map<string, { inside: boolean; at: number }>()
const GIT_CHECK_LIMIT = 256

/**
 * Whether `dir` or one of its ancestors holds a `.git` entry. The answer for a directory
 * is reused for a second: a fan-out creates a thousand children in the same directory at
 * once, and walking up to the root costs a `stat` per level for each of them.
 */
export function insideGitRepository(dir: string): boolean {
  const now = Date.now()
  const known = gitChecks.get(dir)
  if (known && now - known.at < GIT_CHECK_REUSE_MS) return known.inside
  if (gitChecks.size >= GIT_CHECK_LIMIT) gitChecks.clear()
  const inside = lookForGit(dir)
  gitChecks.set(dir, { inside, at: now })
  return inside
}

function lookForGit(dir: string): boolean {
  for (let current = dir; ; current = dirname(current)) {
    if (existsSync(join(current, '.git'))) return true
    if (dirname(current) === current) return false
  }
}

/** The lines of the environment section that describe where and when, not what. */
const ENVIRONMENT_FACTS = /^- (Working directory|Date|Git repository): .*$/gm

/**
 * `text` with the machine- and day-specific facts of the environment section replaced by
 * placeholders (`- Date: <date>`). A recorded run must replay in another directory, on
 * another day and in a checkout that is not a git repository: recordings store and
 * compare system prompts through this, and it is defined here, beside the section it
 * reads, so the two cannot drift apart.
 */
export function maskEnvironmentFacts(text: string): string {
  return text.replace(ENVIRONMENT_FACTS, (_line, fact: string) => `- ${fact}: <${fact.toLowerCase().replace(/ /g, '-')}>`)
}

/**
 * The environment section: working directory, date, platform, git or not. The date is the
 * session's creation day, so a resumed or long session keeps the same prompt.
 */
export function renderEnvironment(agent: Agent): string {
  const { cwd, createdAt } = agent.session.header
  const lines = [
    '# Environment',
    `- Working directory: ${cwd}`,
    `- Date: ${createdAt.slice(0, 10)}`,
    `- Platform: ${process.platform}`,
    `- Git repository: ${insideGitRepository(cwd) ? 'yes' : 'no'}`,
  ]
  return lines.join('\n')
}
