export * from './remote-run.js'
export { quoteStderr, STDERR_QUOTE_CHARS } from './stderr.js'
