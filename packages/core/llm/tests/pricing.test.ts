import { describe, expect, it } from 'vitest'
import { addUsage, checkPriceTable, costOf, emptyTotals, formatTotals } from '@dsh/llm'

describe('price table', () => {
  it('prices cache hits at cacheHitInput and the rest of the input at input, per million tokens', () => {
    const prices = checkPriceTable({ 'deepseek:deepseek-chat': { input: 0.27, cacheHitInput: 0.07, output: 1.1 } })
    const cost = costOf({ inputTokens: 1_000_000, cacheHitInputTokens: 400_000, outputTokens: 100_000, model: 'deepseek:deepseek-chat' }, prices)
    expect(cost).toBeCloseTo(0.6 * 0.27 + 0.4 * 0.07 + 0.1 * 1.1, 10)
  })

  it('prices cache writes at cacheWriteInput, apart from hits and plain input (Anthropic charges more for writes)', () => {
    const prices = checkPriceTable({ 'anthropic:claude-x': { input: 3, cacheHitInput: 0.3, cacheWriteInput: 3.75, output: 15 } })
    const cost = costOf({ inputTokens: 1_000_000, cacheHitInputTokens: 500_000, cacheWriteInputTokens: 300_000, outputTokens: 10_000, model: 'anthropic:claude-x' }, prices)
    expect(cost).toBeCloseTo(0.2 * 3 + 0.5 * 0.3 + 0.3 * 3.75 + 0.01 * 15, 10)
    expect(() => checkPriceTable({ 'anthropic:x': { input: 1, output: 1, cacheWriteInput: -1 } })).toThrow('prices["anthropic:x"].cacheWriteInput')
  })

  it('a model without a price makes the total cost unknown, naming the model', () => {
    const prices = checkPriceTable({ 'deepseek:deepseek-chat': { input: 1, output: 1 } })
    let totals = addUsage(emptyTotals(), { inputTokens: 10, outputTokens: 1, model: 'deepseek:deepseek-chat' }, prices)
    totals = addUsage(totals, { inputTokens: 5, outputTokens: 1, model: 'openai:gpt-4.1' }, prices)
    expect(totals.cost).toBeUndefined()
    expect(formatTotals(totals, true)).toBe('in 15 / out 2 tokens, cost unknown (no price for openai:gpt-4.1)')
  })

  it('rejects negative prices, malformed keys and unknown fields, naming the entry', () => {
    expect(() => checkPriceTable({ 'deepseek:x': { input: -0.1, output: 1 } })).toThrow('prices["deepseek:x"].input must be a number of zero or more')
    expect(() => checkPriceTable({ 'deepseek:x': { input: 1, output: 1, cacheHitInput: -2 } })).toThrow('prices["deepseek:x"].cacheHitInput')
    expect(() => checkPriceTable({ deepseek: { input: 1, output: 1 } })).toThrow('prices["deepseek"]: the key must be a model spec')
    expect(() => checkPriceTable({ 'deepseek:x': { input: 1, outptu: 1 } })).toThrow('unknown key "outptu"')
    expect(() => checkPriceTable({ 'deepseek:x': { input: 1 } })).toThrow('prices["deepseek:x"].output')
    expect(checkPriceTable(undefined)).toEqual({})
  })
})
