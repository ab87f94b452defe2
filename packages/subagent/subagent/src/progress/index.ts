export { ProgressChannel, MAX_PENDING, MAX_TEXT, type ProgressChannelOptions } from './channel.js'
export { followLocalChild, latestTurnUsage, addUsage, noUsage } from './local.js'
export { progressProblem, summariseArgs, compactArgs, displayLine, shorten, MAX_DETAIL, MAX_STATUS, MAX_TOOL_NAME } from './shape.js'
