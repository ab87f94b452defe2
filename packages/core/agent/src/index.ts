export * from './types.js'
export * from './live-agent.js'
export * from './service.js'
export { AgentRegistry as default } from './service.js'
