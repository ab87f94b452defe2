/**
 * `@dsh/ui-server/delegations`: how a parent's session records the children it delegated
 * that have no session of their own (background ones, those that never started), for
 * `dsh sessions tree` as for the page. Loads nothing of the server.
 */
export { backgroundDelegations, budgetDiagnostic, type BackgroundDelegation } from './background.js'
export { neverStartedReason, refusedDelegations, unstartedChildren, type UnstartedChild } from './unstarted.js'
