export * from './remote-run.js'
export { ConversationCore, type ConversationChild, type ConversationTransport, type ConversationTurn, type ConversationTurnControl } from './conversation-turn.js'
export { quoteStderr, STDERR_QUOTE_CHARS } from './stderr.js'
