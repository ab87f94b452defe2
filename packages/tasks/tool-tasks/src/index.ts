export { TaskToolsPlugin, type TaskToolsConfig } from './plugin.js'
export { TaskToolsPlugin as default } from './plugin.js'
export { renderNotice, statusLine } from './render.js'
