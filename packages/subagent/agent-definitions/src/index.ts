/** The public face of agent definitions; the README documents every name here. */
export { AgentDefinitionsService, AgentDefinitionsService as default, type AgentDefinitionsConfig } from './service.js'
export { definitionDirectories, loadDefinitions, type DefinitionDirs } from './discover.js'
export { fromProject, MAX_DEFINITION_BYTES, NAME_PATTERN, parseDefinition, type ParsedDefinition } from './parse.js'
export { definitionProblems, type CompositionFacts, type DefinitionFeatures, type ProviderFacts } from './check.js'
export { DefinitionError, type DefinitionErrorCode } from './errors.js'
export { parseFrontMatter, readFrontMatterFile, readProblem, type FrontMatter, type FrontMatterField } from './front-matter.js'
export { DEFINITION_FIELDS, type AgentDefinition, type BackgroundPolicy, type DefinitionField, type DefinitionFlavour, type DefinitionSet, type DefinitionSource } from './types.js'
export { mcpServerNames, parseMcpServers, type InlineMcpServer, type McpServerEntry } from './mcp-servers.js'
