export * from './render.js'
export * from './tools.js'
export * from './plugin.js'
export { TaskToolsPlugin as default } from './plugin.js'
