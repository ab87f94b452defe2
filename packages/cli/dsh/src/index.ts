export * from './compose.js'
export * from './defaults.js'
export * from './runtime.js'
export * from './run.js'
