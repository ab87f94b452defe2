/** The public face of workspaces; the README documents every name here. */
export { WorkspaceService, WorkspaceService as default } from './service.js'
export { WorkspaceError, type WorkspaceErrorCode } from './errors.js'
export { diffstat } from './changes.js'
export { actingAgents } from './records.js'
export { WORKSPACE_MODES, type ChangedFile, type InvalidWorkspaceRecord, type ListedWorkspace, type MergeOutcome, type WorkspaceChanges, type WorkspaceMode, type WorkspaceRecord, type WorkspaceRef, type WorkspaceRequest } from './types.js'
