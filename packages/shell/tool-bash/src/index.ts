export * from './render.js'
export * from './plugin.js'
export { BashToolPlugin as default } from './plugin.js'
