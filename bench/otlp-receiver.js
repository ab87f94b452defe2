// The testkit's OTLP receiver as a child process for bench/tracing.js: sends its origin,
// then answers each 'count' message with the number of spans received.
import { startOtlpReceiver } from '@dsh/testkit/otlp'

const receiver = await startOtlpReceiver()
process.send(receiver.origin)
process.on('message', () => process.send(receiver.spans.length))
