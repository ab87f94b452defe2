export * from './plugin.js'
export { SubagentReportPlugin as default } from './plugin.js'
