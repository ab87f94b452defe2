export { AgentRegistry, DEFAULT_PERSONA } from './service.js'
export { AgentRegistry as default } from './service.js'
export type {
  Agent,
  AgentCleanup,
  AgentOptions,
  AgentResumeListener,
  AgentStatus,
  CreateAgentOptions,
  InputBoundary,
  InputSource,
  TurnDriver,
  TurnResult,
  TurnRuntime,
} from './types.js'
export { AgentError, type AgentErrorCode } from './errors.js'
export { serviceInstance } from './service-instance.js'
export { callsClosedByInterruption, INTERRUPTED_TURN } from './interrupted-turn.js'
export { maskEnvironmentFacts, type ComposedPrompt, type PromptSection, type SectionFailure } from './prompt-sections.js'
