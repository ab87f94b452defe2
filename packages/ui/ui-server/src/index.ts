// The face of `dsh ui`: the server and the running process's desk (what the CLI serves
// with), and the reading of a session directory into views (the bench drives them). The
// rest stays inside; the package's tests import it from its files.
export { serveUi, UiError } from './server.js'
export { RunDesk } from './live.js'
export { SessionIndex } from './index-of-sessions.js'
export { Views } from './views.js'
