/**
 * The official ACP SDK, imported by the first child this process connects to rather than
 * when the provider loads: the SDK builds its protocol's schemas as it is imported (about
 * 15 ms), and a run that composes this provider but delegates nothing to it must not pay
 * for them. A child imports it after its process is spawned (`child.ts`), so the import
 * runs while the agent starts. The files the provider loads import only the SDK's types,
 * and read its values from the child's connection or through `loadedAcpSdk` (see
 * `rpc-error.ts`); `shared-workspace.ts`, which uses the SDK's error class throughout, is
 * itself imported by a child as it opens.
 */
import { importOnFirstUse } from '@dsh/base'

export type AcpSdk = typeof import('@agentclientprotocol/sdk')

const sdk = importOnFirstUse((): Promise<AcpSdk> => import('@agentclientprotocol/sdk'))

/** The SDK, imported once per process. */
export function loadAcpSdk(): Promise<AcpSdk> {
  return sdk.load()
}

/** The SDK if a child already imported it, else `undefined` (nothing the SDK made can exist yet). */
export function loadedAcpSdk(): AcpSdk | undefined {
  return sdk.loaded()
}
