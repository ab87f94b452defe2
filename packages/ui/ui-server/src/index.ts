export { serveUi, UiError, type UiOptions, type UiServer } from './server.js'
export { SessionIndex, MAX_FILE_BYTES, type IndexedSession } from './index-of-sessions.js'
export { Views, MAX_ENTRY_CHARS, type NodeView, type RunView } from './views.js'
