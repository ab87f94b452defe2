export * from './loop.js'
export * from './plugin.js'
export { AgentLoop as default } from './plugin.js'
