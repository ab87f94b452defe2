/**
 * `@dsh/ui-server/delegations`: the children a parent's session records that never
 * started (and so have no session of their own), and the order a parent asked for its
 * children, for `dsh sessions tree` as for the page.
 * Loads nothing of the server.
 */
export { delegationCalls, delegationOf, type DelegationOfResult } from './delegation-record.js'
export { askedOrder, byAsking, unstartedChildren, type AskedAt, type UnstartedChild } from './unstarted.js'
