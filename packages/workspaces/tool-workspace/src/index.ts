/** The public face of the workspace tool; the README documents every name here. */
export { WorkspaceToolPlugin, WorkspaceToolPlugin as default } from './plugin.js'
