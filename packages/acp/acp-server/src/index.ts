export * from './prompt.js'
export * from './updates.js'
export * from './server.js'
