export * from './plugin.js'
export * from './render.js'
export { SubagentControlPlugin as default } from './plugin.js'
