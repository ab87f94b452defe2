export { DshError, errorMessage, isAbortError, printable } from './errors.js'
export { assertNever, isRecord } from './guards.js'
export * from './outcomes.js'
export { rejectOnThrow } from './promises.js'
