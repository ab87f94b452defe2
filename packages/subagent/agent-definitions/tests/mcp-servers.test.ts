import { describe, expect, it } from 'vitest'
import { DefinitionError, definitionProblems, mcpServerNames, parseDefinition } from '../src/index.js'

const file = '/p/.dsh/agents/docs.md'
const parse = (front: string, flavour: 'dsh' | 'claude-code' = 'dsh') => parseDefinition(`---\nname: docs\ndescription: Reads docs.\n${front}\n---\nRead.\n`, file, 'user', flavour)

function refused(front: string): string {
  try {
    parse(front)
  } catch (error) {
    expect(error).toBeInstanceOf(DefinitionError)
    expect((error as Error).message).not.toMatch(/\n/)
    return (error as Error).message
  }
  throw new Error('expected a DefinitionError')
}

describe('mcpServers', () => {
  it('reads names of configured servers and inline servers, as Claude Code writes them', () => {
    const { definition } = parse('mcpServers:\n  - github\n  - files: { command: npx, args: [-y, server-filesystem, /srv], env: { LOG: warn } }\n  - api: { type: http, url: "http://127.0.0.1:9/mcp", headers: { X: y } }')
    expect(definition.mcpServers).toEqual([
      'github',
      { name: 'files', config: { command: 'npx', args: ['-y', 'server-filesystem', '/srv'], env: { LOG: 'warn' } } },
      { name: 'api', config: { type: 'http', url: 'http://127.0.0.1:9/mcp', headers: { X: 'y' } } },
    ])
    expect(mcpServerNames(definition.mcpServers)).toEqual(['github', 'files', 'api'])
  })

  it('is mapped from a Claude Code agent file, not noted as unused', () => {
    const { definition, notes } = parse('mcpServers: [github]', 'claude-code')
    expect(definition.mcpServers).toEqual(['github'])
    expect(notes).toEqual([])
  })

  it('refuses each bad entry in one line naming the file and the line', () => {
    expect(refused('mcpServers: github')).toBe(`${file}:4: mcpServers must be a list of server names or inline servers (mcpServers: [github, { docs: { command: npx, args: [-y, some-server] } }])`)
    expect(refused('mcpServers: ["a__b"]')).toMatch(/^\/p\/\.dsh\/agents\/docs\.md:4: mcpServers: "a__b" is not a server name/)
    expect(refused('mcpServers: [github, github]')).toBe(`${file}:4: mcpServers names "github" twice`)
    expect(refused('mcpServers: [{ a: { command: x }, b: { command: y } }]')).toMatch(/:4: mcpServers: each entry is a server name or a mapping of one name/)
    expect(refused('mcpServers: [{ files: { args: [x] } }]')).toBe(`${file}:4: mcpServers: server "files": a stdio server needs a "command"`)
    expect(refused('mcpServers: [{ files: { command: x, args: x } }]')).toBe(`${file}:4: mcpServers: server "files": "args" must be a list of strings`)
    expect(refused('mcpServers: [{ files: { command: x, env: { A: 1 } } }]')).toBe(`${file}:4: mcpServers: server "files": "env" must map names to strings`)
    expect(refused('mcpServers: [{ files: { command: x, timeout: 5 } }]')).toMatch(/server "files": unknown key "timeout" \(a stdio server takes command, args, env, cwd, readOnlyHints\)$/)
    expect(refused('mcpServers: [{ files: { command: x, readOnlyHints: yes please } }]')).toBe(`${file}:4: mcpServers: server "files": "readOnlyHints" must be true or false`)
    expect(refused('mcpServers: [{ api: { type: http, url: "ftp://x" } }]')).toBe(`${file}:4: mcpServers: server "api": an http server needs a "url" starting http:// or https://`)
    expect(refused('mcpServers: [{ api: { type: sse, url: "http://x" } }]')).toMatch(/server "api": "type" "sse" is not supported \(stdio or http\)$/)
  })

  it('refuses mcpServers on a continuable helper whose child is another program, which would start without them', () => {
    const facts = (modelsHere: boolean) => ({ provider: () => ({ lacks: () => undefined, continuable: true, modelsHere }), providers: ['codex', 'spawn'], tools: [], modelProblem: () => undefined, approvals: true })
    const kept = parseDefinition('---\nname: docs\ndescription: Reads docs.\nprovider: codex\ncontinuable: true\nmcpServers: [files]\n---\n', file, 'user', 'dsh').definition
    expect(definitionProblems([kept], facts(false))).toEqual([`${file}:6: helper "docs": a continuable helper of provider "codex" does not get its mcpServers yet (a one-shot one does); remove continuable or mcpServers, or use spawn or fork`])
    expect(definitionProblems([kept], facts(true))).toEqual([])
    expect(definitionProblems([{ ...kept, continuable: false }], facts(false))).toEqual([])
  })
})
