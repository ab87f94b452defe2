/**
 * The app-server's progress items, checked: which thread items are tool calls (and what a
 * parent is shown of each), and the token counts of a usage notification. Untrusted input:
 * an item that does not fit is reported `malformed` with a reason, never thrown.
 */
import { assertNever, isRecord } from '@dsh/base'
import type { ThreadItem } from './protocol/index.js'

/** A tool call as a parent is shown it: a display name, its arguments, and at completion whether it worked. */
export interface ToolItem {
  id: string
  name: string
  /** The arguments, as given (summarised for display by the reader). */
  args?: unknown
  /** At completion: whether it worked; with `detail` saying why not. */
  ok: boolean
  detail?: string
}

type ItemReading = { kind: 'tool'; tool: ToolItem } | { kind: 'not-a-tool' } | { kind: 'malformed'; reason: string }

/** Every item type of the generated protocol, tool call or not; `satisfies` fails the build when Codex adds one. */
const ITEM_TYPES = {
  userMessage: false,
  hookPrompt: false,
  agentMessage: false,
  functionCallOutput: false,
  plan: false,
  reasoning: false,
  commandExecution: true,
  fileChange: true,
  mcpToolCall: true,
  dynamicToolCall: true,
  collabAgentToolCall: true,
  subAgentActivity: false,
  webSearch: true,
  imageView: true,
  sleep: false,
  imageGeneration: true,
  enteredReviewMode: false,
  exitedReviewMode: false,
  contextCompaction: false,
} satisfies Record<ThreadItem['type'], boolean>

type ToolItemType = { [K in keyof typeof ITEM_TYPES]: (typeof ITEM_TYPES)[K] extends true ? K : never }[keyof typeof ITEM_TYPES]

export function readToolItem(item: unknown): ItemReading {
  if (!isRecord(item)) return { kind: 'malformed', reason: 'an item that is not an object' }
  const { type, id } = item
  if (typeof type !== 'string') return { kind: 'malformed', reason: 'an item without a type' }
  if (!Object.hasOwn(ITEM_TYPES, type)) return { kind: 'malformed', reason: `an item of unknown type ${JSON.stringify(type.slice(0, 60))}` }
  if (!ITEM_TYPES[type as keyof typeof ITEM_TYPES]) return { kind: 'not-a-tool' }
  if (typeof id !== 'string' || !id) return { kind: 'malformed', reason: `a ${type} item without an id` }
  return toolOf(type as ToolItemType, id, item)
}

function toolOf(type: ToolItemType, id: string, item: Record<string, unknown>): ItemReading {
  const status = item.status
  const failed = status === 'failed' || status === 'declined' || status === 'interrupted'
  switch (type) {
    case 'commandExecution': {
      if (typeof item.command !== 'string') return { kind: 'malformed', reason: 'a commandExecution item without a command' }
      const exitCode = typeof item.exitCode === 'number' ? item.exitCode : undefined
      const ok = !failed && (exitCode === undefined || exitCode === 0)
      return tool({ id, name: 'command', args: item.command, ok }, ok ? undefined : status === 'declined' ? 'declined' : exitCode !== undefined ? `exit code ${exitCode}` : String(status))
    }
    case 'fileChange': {
      const paths = Array.isArray(item.changes) ? item.changes.map((change) => (isRecord(change) && typeof change.path === 'string' ? change.path : '?')) : []
      return tool({ id, name: 'file change', args: paths.join(', '), ok: !failed }, failed ? String(status) : undefined)
    }
    case 'mcpToolCall': {
      if (typeof item.tool !== 'string' || !item.tool) return { kind: 'malformed', reason: 'an mcpToolCall item without a tool' }
      const server = typeof item.server === 'string' && item.server ? `${item.server}.` : ''
      const error = isRecord(item.error) && typeof item.error.message === 'string' ? item.error.message : undefined
      return tool({ id, name: `${server}${item.tool}`, args: item.arguments, ok: !failed && error === undefined }, error ?? (failed ? String(status) : undefined))
    }
    case 'dynamicToolCall': {
      if (typeof item.tool !== 'string' || !item.tool) return { kind: 'malformed', reason: 'a dynamicToolCall item without a tool' }
      const ok = !failed && item.success !== false
      return tool({ id, name: item.tool, args: item.arguments, ok }, ok ? undefined : String(status))
    }
    case 'collabAgentToolCall': {
      if (typeof item.tool !== 'string' || !item.tool) return { kind: 'malformed', reason: 'a collabAgentToolCall item without a tool' }
      return tool({ id, name: item.tool, args: item.prompt ?? undefined, ok: !failed }, failed ? String(status) : undefined)
    }
    case 'webSearch':
      return tool({ id, name: 'web search', args: typeof item.query === 'string' ? item.query : undefined, ok: true })
    case 'imageView':
      return tool({ id, name: 'view image', args: typeof item.path === 'string' ? item.path : undefined, ok: true })
    case 'imageGeneration':
      return tool({ id, name: 'image generation', ok: !failed }, failed ? String(status) : undefined)
    default:
      return assertNever(type, 'tool item type')
  }
}

function tool(base: ToolItem, detail?: string): ItemReading {
  return { kind: 'tool', tool: detail === undefined ? base : { ...base, detail } }
}

/** Token counts as a run reports them. */
export interface TokenCounts {
  inputTokens: number
  outputTokens: number
  cachedInputTokens: number
}

/** `thread/tokenUsage/updated`'s `tokenUsage` (`{ total, last }` breakdowns), or why it does not fit. */
export function readTokenUsage(value: unknown): { last: TokenCounts; total: TokenCounts } | string {
  if (!isRecord(value)) return 'a tokenUsage that is not an object'
  const last = countsOf(value.last)
  const total = countsOf(value.total)
  if (!last || !total) return 'a tokenUsage without whole inputTokens, outputTokens and cachedInputTokens in last and total'
  return { last, total }
}

function countsOf(value: unknown): TokenCounts | undefined {
  if (!isRecord(value)) return undefined
  const { inputTokens, outputTokens, cachedInputTokens } = value
  if (!isCount(inputTokens) || !isCount(outputTokens) || !isCount(cachedInputTokens)) return undefined
  return { inputTokens, outputTokens, cachedInputTokens }
}

function isCount(value: unknown): value is number {
  return typeof value === 'number' && Number.isSafeInteger(value) && value >= 0
}
