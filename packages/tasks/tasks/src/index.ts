export * from './types.js'
export * from './errors.js'
export * from './service.js'
export { TaskService as default } from './service.js'
