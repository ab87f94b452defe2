/**
 * The A2A SDK (`@a2a-js/sdk` and its `/client`), imported when the provider first reaches a
 * worker rather than when it loads: the SDK is kept outside dsh's bundle and read from disk
 * without a code cache, which cost a `dsh run` that composed this provider about 40 ms
 * whether or not it delegated. `worker-pool.ts` imports it before it makes a worker's
 * client; everything that reads its values (the protocol's enums) runs on a worker's
 * answers, so after that, and reads them through `a2aSdk()`. Every file imports its types.
 */
import { importOnFirstUse } from '@dsh/base'

export type A2aSdk = typeof import('@a2a-js/sdk')
export type A2aClientSdk = typeof import('@a2a-js/sdk/client')

const sdks = importOnFirstUse(() => Promise.all([import('@a2a-js/sdk'), import('@a2a-js/sdk/client')]).then(([sdk, client]) => ({ sdk, client })))

/** The SDK and its client, imported once per process. */
export function loadA2aSdk(): Promise<{ sdk: A2aSdk; client: A2aClientSdk }> {
  return sdks.load()
}

/** The SDK's values, for code that runs on a worker's answers (the SDK was imported to reach the worker). */
export function a2aSdk(): A2aSdk {
  const loaded = sdks.loaded()
  if (loaded === undefined) throw new Error('the A2A SDK was read before any worker was reached (it is imported by worker-pool.ts as a worker is reached)')
  return loaded.sdk
}
