export { AgentLoop } from './plugin.js'
export { AgentLoop as default } from './plugin.js'
export { runTurn, type LoopServices, type NextStep } from './loop.js'
