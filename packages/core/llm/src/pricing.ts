import { isRecord } from '@dsh/base'
import { LlmRegistryError } from './errors.js'
import type { Usage } from './messages.js'

/** Prices of one model in money units (the table's own currency) per million tokens. */
export interface ModelPrice {
  input: number
  output: number
  /** Input tokens served from the provider's prefix cache; `input` when unset. */
  cacheHitInput?: number
  /** Input tokens written to the provider's prefix cache (Anthropic charges more for them); `input` when unset. */
  cacheWriteInput?: number
}

/** Model spec (`adapter:model`) → its prices. */
export type PriceTable = Record<string, ModelPrice>

const PRICE_KEYS = ['input', 'output', 'cacheHitInput', 'cacheWriteInput'] as const

/**
 * Checks the shape of a price table and returns it frozen: every key a full model spec,
 * every price a finite number of zero or more. A bad entry throws `INVALID_PRICES` naming
 * it, so a typo never silently prices a run at zero.
 */
export function checkPriceTable(value: unknown): PriceTable {
  if (value === undefined) return {}
  if (!isRecord(value)) throw new LlmRegistryError('INVALID_PRICES', 'prices must be a table of model specs (adapter:model) to { input, output, cacheHitInput?, cacheWriteInput? }')
  const table: PriceTable = {}
  for (const [spec, entry] of Object.entries(value)) {
    const colon = spec.indexOf(':')
    if (colon <= 0 || colon === spec.length - 1) throw new LlmRegistryError('INVALID_PRICES', `prices["${spec}"]: the key must be a model spec adapter:model (e.g. deepseek:deepseek-chat)`)
    if (!isRecord(entry)) throw new LlmRegistryError('INVALID_PRICES', `prices["${spec}"] must be { input, output, cacheHitInput?, cacheWriteInput? } per million tokens`)
    const unknown = Object.keys(entry).filter((key) => !(PRICE_KEYS as readonly string[]).includes(key))
    if (unknown.length) throw new LlmRegistryError('INVALID_PRICES', `prices["${spec}"] has unknown key ${unknown.map((key) => `"${key}"`).join(', ')} (known: ${PRICE_KEYS.join(', ')})`)
    for (const key of PRICE_KEYS) {
      const price = entry[key]
      if (price === undefined && (key === 'cacheHitInput' || key === 'cacheWriteInput')) continue
      if (typeof price !== 'number' || !Number.isFinite(price) || price < 0) {
        throw new LlmRegistryError('INVALID_PRICES', `prices["${spec}"].${key} must be a number of zero or more (per million tokens), got ${JSON.stringify(price) ?? 'nothing'}`)
      }
    }
    table[spec] = { input: entry.input as number, output: entry.output as number, ...(entry.cacheHitInput !== undefined && { cacheHitInput: entry.cacheHitInput as number }), ...(entry.cacheWriteInput !== undefined && { cacheWriteInput: entry.cacheWriteInput as number }) }
  }
  return Object.freeze(table)
}

/** Token counts added up over many responses. */
export interface UsageTotals {
  inputTokens: number
  cacheHitInputTokens: number
  outputTokens: number
  /** Responses counted. */
  responses: number
  /** Cost in the table's unit; undefined when some counted usage had no price. */
  cost: number | undefined
  /** Model specs that were used but have no price (so `cost` is undefined). */
  unpriced: string[]
}

export function emptyTotals(): UsageTotals {
  return { inputTokens: 0, cacheHitInputTokens: 0, outputTokens: 0, responses: 0, cost: 0, unpriced: [] }
}

/** The cost of one response's usage, or undefined when its model has no price. */
export function costOf(usage: Usage, prices: PriceTable): number | undefined {
  const price = usage.model === undefined ? undefined : prices[usage.model]
  if (!price) return undefined
  const hits = Math.min(usage.cacheHitInputTokens ?? 0, usage.inputTokens)
  const writes = Math.min(usage.cacheWriteInputTokens ?? 0, usage.inputTokens - hits)
  const plain = usage.inputTokens - hits - writes
  return (plain * price.input + hits * (price.cacheHitInput ?? price.input) + writes * (price.cacheWriteInput ?? price.input) + usage.outputTokens * price.output) / 1_000_000
}

/** `totals` plus one response's usage (a new object). */
export function addUsage(totals: UsageTotals, usage: Usage, prices: PriceTable): UsageTotals {
  const cost = costOf(usage, prices)
  const model = usage.model ?? 'an unrecorded model'
  return {
    inputTokens: totals.inputTokens + usage.inputTokens,
    cacheHitInputTokens: totals.cacheHitInputTokens + (usage.cacheHitInputTokens ?? 0),
    outputTokens: totals.outputTokens + usage.outputTokens,
    responses: totals.responses + 1,
    cost: totals.cost === undefined || cost === undefined ? undefined : totals.cost + cost,
    unpriced: cost === undefined && !totals.unpriced.includes(model) ? [...totals.unpriced, model] : totals.unpriced,
  }
}

export function mergeTotals(a: UsageTotals, b: UsageTotals): UsageTotals {
  return {
    inputTokens: a.inputTokens + b.inputTokens,
    cacheHitInputTokens: a.cacheHitInputTokens + b.cacheHitInputTokens,
    outputTokens: a.outputTokens + b.outputTokens,
    responses: a.responses + b.responses,
    cost: a.cost === undefined || b.cost === undefined ? undefined : a.cost + b.cost,
    unpriced: [...a.unpriced, ...b.unpriced.filter((model) => !a.unpriced.includes(model))],
  }
}

/** `in 1200 (cache hit 1024) / out 40 tokens, cost 0.000512` — cost only with a price table. */
export function formatTotals(totals: UsageTotals, priced: boolean): string {
  const hits = totals.cacheHitInputTokens ? ` (cache hit ${totals.cacheHitInputTokens})` : ''
  const tokens = `in ${totals.inputTokens}${hits} / out ${totals.outputTokens} tokens`
  if (!priced || totals.responses === 0) return tokens
  if (totals.cost === undefined) return `${tokens}, cost unknown (no price for ${totals.unpriced.join(', ')})`
  return `${tokens}, cost ${formatCost(totals.cost)}`
}

function formatCost(cost: number): string {
  return cost === 0 ? '0' : cost >= 0.01 ? cost.toFixed(4) : cost.toPrecision(3)
}
