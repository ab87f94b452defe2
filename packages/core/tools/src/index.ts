export * from './types.js'
export * from './errors.js'
export * from './service.js'
export { ToolRegistry as default } from './service.js'
