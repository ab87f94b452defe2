/**
 * `@dsh/ui-server/delegations`: the children a parent's session records that never
 * started (and so have no session of their own), for `dsh sessions tree` as for the page.
 * Loads nothing of the server.
 */
export { unstartedChildren, type UnstartedChild } from './unstarted.js'
