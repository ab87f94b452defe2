/**
 * Who sent a request, as the SDK's call context carries it to the request handler: the
 * approver (the request carries the approver's token) or anyone else. Only the approver's
 * messages may answer a task's `input-required` request when the server has one
 * (`approvals.ts`, `Answerer`).
 */
import type { Request } from 'express'
import { UnauthenticatedUser, type User } from '@a2a-js/sdk/server'
import type { UserBuilder } from '@a2a-js/sdk/server/express'
import { carriesBearer } from './auth.js'

/**
 * The user of a request that carries the approver's token. Known by identity, not by
 * name: its name is every other caller's (the SDK scopes tasks by user name, and the
 * approver must reach the tasks it answers).
 */
export const APPROVER_USER: User = {
  get isAuthenticated() {
    return true
  },
  get userName() {
    return new UnauthenticatedUser().userName
  },
}

/** The SDK's user builder: the approver for a request carrying `approverToken`, an unauthenticated user otherwise. */
export function approverUserBuilder(approverToken: string | undefined): UserBuilder {
  return (request: Request) => Promise.resolve(approverToken !== undefined && carriesBearer(request.get('authorization'), approverToken) ? APPROVER_USER : new UnauthenticatedUser())
}
