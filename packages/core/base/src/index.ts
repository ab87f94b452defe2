export { DshError, errorMessage, isAbortError } from './errors.js'
export { assertNever, isRecord } from './guards.js'
export * from './outcomes.js'
