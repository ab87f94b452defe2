export * from './structured-output.js'
export * from './in-process-run.js'
export * from './plugin.js'
export { SpawnPlugin as default } from './plugin.js'
