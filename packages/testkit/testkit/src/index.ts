export { startLoopbackServer, pause, untilStopped, writeFlushed, type LoopbackServer, type LoopbackHandler } from './loopback-server.js'
export { startFakeOpenAIChat, type FakeOpenAIChat, type RecordedRequest } from './openai-chat-server.js'
export type { FakeChatResponse, FakeToolCall, FakeFinishReason } from './openai-chat-wire.js'
