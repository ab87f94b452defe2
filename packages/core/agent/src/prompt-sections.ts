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

type PromptPart = { name: string; text: string }

/** Render `ordered` (already sorted, see `sortSections`) for `agent`, which sees `visibleTools`. */
export function composePrompt(ordered: readonly PromptSection[], agent: Agent, visibleTools: readonly string[]): ComposedPrompt {
  // The children of a fan-out render the same texts as the agent composed before them:
  // while every part matches the last composition, nothing is built (no parts, no join).
  const last = lastComposition
  let matched = 0
  let parts: PromptPart[] | undefined
  let failures: SectionFailure[] | undefined
  for (const section of ordered) {
    if (section.tool !== undefined && !visibleTools.includes(section.tool)) continue
    let text: string | undefined
    try {
      if (section.visible && !section.visible(agent)) continue
      text = section.render(agent)?.trim()
    } catch (error) {
      ;(failures ??= []).push({ name: section.name, error: errorMessage(error) })
      continue
    }
    if (!text) continue
    if (parts === undefined && last !== undefined && matched < last.parts.length) {
      const earlier = last.parts[matched]!
      if (earlier.name === section.name && earlier.text === text) {
        matched++
        continue
      }
    }
    parts ??= last === undefined ? [] : last.parts.slice(0, matched)
    parts.push({ name: section.name, text })
  }
  const shared = parts === undefined && last !== undefined && matched === last.parts.length ? last : sharedComposition(parts ?? last?.parts.slice(0, matched) ?? [])
  lastComposition = shared
  return failures === undefined ? shared : { text: shared.text, parts: shared.parts, failures }
}

/** Most distinct compositions remembered for sharing; past it the memory starts over. */
const SHARED_COMPOSITIONS_LIMIT = 64
const sharedCompositions = new Map<string, ComposedPrompt>()
/** The composition returned last: the next agent most likely gets the same one. */
let lastComposition: ComposedPrompt | undefined
const NO_FAILURES: SectionFailure[] = Object.freeze([]) as unknown as SectionFailure[]

/**
 * The composition of an earlier identical prompt, when there is one: the children of a
 * fan-out share one prompt (same persona, directory, day and tools), and a thousand live
 * children should hold one copy of it, not a thousand. Shared compositions are frozen.
 */
function sharedComposition(parts: PromptPart[]): ComposedPrompt {
  const text = parts.map((part) => part.text).join('\n\n')
  const known = sharedCompositions.get(text)
  if (known && known.parts.length === parts.length && known.parts.every((part, index) => part.name === parts[index]!.name)) return known
  if (sharedCompositions.size >= SHARED_COMPOSITIONS_LIMIT) sharedCompositions.clear()
  const entry: ComposedPrompt = Object.freeze({ text, parts: Object.freeze(parts.map((part) => Object.freeze(part))) as PromptPart[], failures: NO_FAILURES })
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
  const git = insideGitRepository(cwd)
  // Sessions created in the same directory on the same day get the same string, not an equal copy.
  const last = lastEnvironment
  if (last !== undefined && last.cwd === cwd && last.git === git && createdAt.startsWith(last.day)) return last.text
  const day = createdAt.slice(0, 10)
  const lines = [
    '# Environment',
    `- Working directory: ${cwd}`,
    `- Date: ${day}`,
    `- Platform: ${process.platform}`,
    `- Git repository: ${git ? 'yes' : 'no'}`,
  ]
  const text = lines.join('\n')
  lastEnvironment = { cwd, day, git, text }
  return text
}

/** The environment section rendered last, and what it was rendered from. */
let lastEnvironment: { cwd: string; day: string; git: boolean; text: string } | undefined
