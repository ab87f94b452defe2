import type { AnyMessage, Stream } from '@agentclientprotocol/sdk'

/**
 * Drop `session/update` notifications whose update is an extension variant
 * (`sessionUpdate` starting with `_`). ACP reserves the `_` prefix for extensions, and
 * the contract says to ignore them; left in, the stable schema would reject each one
 * and the SDK would log it to this process's stderr. Extension *methods* (`_foo/bar`
 * notifications) need no filter: the SDK drops a notification nobody handles.
 */
export function withoutExtensionUpdates(stream: Stream): Stream {
  const filter = new TransformStream<AnyMessage, AnyMessage>({
    transform(message, controller) {
      if (!isExtensionUpdate(message)) controller.enqueue(message)
    },
  })
  return { readable: stream.readable.pipeThrough(filter), writable: stream.writable }
}

function isExtensionUpdate(message: AnyMessage): boolean {
  if (!('method' in message) || message.method !== 'session/update' || 'id' in message) return false
  const update = (message.params as { update?: { sessionUpdate?: unknown } } | undefined)?.update
  return typeof update?.sessionUpdate === 'string' && update.sessionUpdate.startsWith('_')
}
