/**
 * A helper's own MCP servers (`mcpServers:` of its definition) through the built CLI, on a
 * real third-party server from npm (`@modelcontextprotocol/server-filesystem`, a
 * devDependency of @dsh/mcp): the scripted parent delegates to a helper that names the
 * server, whose child calls one of its tools, and the answer reaches the parent; a sibling
 * helper that does not name it cannot see the tool. An inline server of the user's own
 * definition runs the same; a project's definition's inline server does not run unless
 * the user's config allows it, and the run says which file and what to set.
 */
import { mkdirSync, readdirSync, readFileSync, writeFileSync } from 'node:fs'
import { join } from 'node:path'
import { describe, expect, it } from 'vitest'
import { repoRoot, runDsh, tempDir } from './cli.js'

const FILESYSTEM_SERVER = join(repoRoot, 'node_modules/@modelcontextprotocol/server-filesystem/dist/index.js')

/** Every tool result of every session of the run, as `name: text`. */
function toolResults(sessions: string): string[] {
  return readdirSync(sessions)
    .filter((name) => name.endsWith('.jsonl'))
    .flatMap((name) => readFileSync(join(sessions, name), 'utf8').split('\n').filter(Boolean).map((line) => JSON.parse(line) as { type?: string; result?: { name: string; content: { text: string }[] } }))
    .flatMap((event) => (event.type === 'tool/result' && event.result ? [`${event.result.name}: ${event.result.content.map((part) => part.text).join('')}`] : []))
}

interface Setup {
  dir: string
  docs: string
  home: string
  args: string[]
}

/** A directory the server serves (notes.txt), a config, the helpers' directories and a script: root asks both helpers at once. */
function setup(mcpEntry: (docs: string) => string): Setup {
  const dir = tempDir()
  const docs = join(dir, 'docs')
  mkdirSync(docs)
  writeFileSync(join(docs, 'notes.txt'), 'the answer is 42\n')
  const home = join(dir, 'home')
  mkdirSync(join(home, 'agents'), { recursive: true })
  const config = ['- name: "@dsh/mcp"', `  config: ${mcpEntry(docs)}`, '- id: approvals', '  name: "@dsh/approvals"', '  config: { allow: ["mcp__files__read_text_file"] }']
  writeFileSync(join(dir, 'dsh.yml'), `${config.join('\n')}\n`)
  writeFileSync(join(dir, 'script.yml'), [
    '- when: { prompt: "^read the notes" }',
    '  reply:',
    `    - call: { tool: mcp__files__read_text_file, args: { path: ${JSON.stringify(join(docs, 'notes.txt'))} } }`,
    '    - text: "{{last_tool_result}}"',
    '- when: { depth: 0 }',
    '  reply:',
    '    - calls:',
    '        - { tool: subagent, args: { agent: reader, description: one, prompt: "read the notes 1" } }',
    '        - { tool: subagent, args: { agent: sibling, description: two, prompt: "read the notes 2" } }',
    '    - text: "root got: {{tool_results}}"',
    '',
  ].join('\n'))
  const args = ['run', '--config', join(dir, 'dsh.yml'), '--model', `scripted:${join(dir, 'script.yml')}`, '--session-dir', join(dir, 'sessions'), '--permission', 'reject', '--quiet', 'go']
  return { dir, docs, home, args }
}

function helper(dir: string, name: string, front: string): string {
  mkdirSync(dir, { recursive: true })
  const file = join(dir, `${name}.md`)
  writeFileSync(file, `---\nname: ${name}\ndescription: Reads the notes.\n${front}---\nYou read notes.\n`)
  return file
}

const serverEntry = (docs: string) => `{ command: ${JSON.stringify(process.execPath)}, args: [${JSON.stringify(FILESYSTEM_SERVER)}, ${JSON.stringify(docs)}] }`

describe("a helper's mcpServers: through dsh run", () => {
  it("a helper naming a server of the user's config calls its tool and the answer reaches the parent; a sibling that does not name it cannot see the tool", async () => {
    const { args, home, dir: root } = setup((docs) => `{ servers: { files: ${serverEntry(docs)} } }`)
    helper(join(home, 'agents'), 'reader', 'mcpServers: [files]\n')
    helper(join(home, 'agents'), 'sibling', '')
    const result = await runDsh(args, { cwd: root, env: { DSH_HOME: home }, timeoutMs: 60_000 })
    expect(result.code, result.stderr).toBe(0)
    expect(result.stdout).toContain('root got: the answer is 42')
    const reads = toolResults(join(root, 'sessions')).filter((line) => line.startsWith('mcp__files__read_text_file: '))
    expect(reads).toHaveLength(2)
    expect(reads).toContain('mcp__files__read_text_file: the answer is 42\n')
    expect(reads.filter((line) => line.startsWith('mcp__files__read_text_file: unknown tool "mcp__files__read_text_file"'))).toHaveLength(1)
  })

  it("an inline server of the user's own definition runs for its helper only; a project's definition's inline server is not started, and the run says which file and what to set", async () => {
    const { args, home, dir, docs } = setup(() => '{}')
    helper(join(home, 'agents'), 'reader', `mcpServers:\n  - files: ${serverEntry(docs)}\n`)
    helper(join(home, 'agents'), 'sibling', '')
    // The project's server would leave a file behind if it ever ran.
    writeFileSync(join(dir, 'server.cjs'), `require('node:fs').writeFileSync(${JSON.stringify(join(dir, 'ran'))}, 'x')\n`)
    const projectFile = helper(join(dir, '.dsh', 'agents'), 'cloned', `mcpServers:\n  - cloned: { command: ${JSON.stringify(process.execPath)}, args: [${JSON.stringify(join(dir, 'server.cjs'))}] }\n`)
    const result = await runDsh(args, { cwd: dir, env: { DSH_HOME: home }, timeoutMs: 60_000 })
    expect(result.code, result.stderr).toBe(0)
    expect(result.stdout).toContain('root got: the answer is 42')
    const reads = toolResults(join(dir, 'sessions')).filter((line) => line.startsWith('mcp__files__read_text_file: '))
    expect(reads).toContain('mcp__files__read_text_file: the answer is 42\n')
    expect(reads.filter((line) => line.startsWith('mcp__files__read_text_file: unknown tool'))).toHaveLength(1)
    expect(result.stderr).toContain(`${projectFile}:4: helper "cloned": its inline MCP server "cloned" is not started`)
    expect(result.stderr).toContain('set projectHelperServers: true in the @dsh/mcp entry of your own config')
    expect(readdirSync(dir)).not.toContain('ran')
  })

  it('with no @dsh/mcp entry in the config, a helper naming an inline server still gets it: the MCP client is composed for it', async () => {
    const { args, home, dir, docs } = setup(() => '{}')
    // The config names only the approvals: nothing asks for the MCP client but the helper.
    writeFileSync(join(dir, 'dsh.yml'), '- id: approvals\n  name: "@dsh/approvals"\n  config: { allow: ["mcp__files__read_text_file"] }\n')
    helper(join(home, 'agents'), 'reader', `mcpServers:\n  - files: ${serverEntry(docs)}\n`)
    helper(join(home, 'agents'), 'sibling', '')
    const result = await runDsh(args, { cwd: dir, env: { DSH_HOME: home }, timeoutMs: 60_000 })
    expect(result.code, result.stderr).toBe(0)
    expect(result.stdout).toContain('root got: the answer is 42')
  })

  it('a config that disables the MCP client while a helper names servers says so, naming the helper and what to add', async () => {
    const { args, home, dir, docs } = setup(() => '{}')
    writeFileSync(join(dir, 'dsh.yml'), '- name: "@dsh/mcp"\n  disabled: true\n')
    helper(join(home, 'agents'), 'reader', `mcpServers:\n  - files: ${serverEntry(docs)}\n`)
    helper(join(home, 'agents'), 'sibling', '')
    const result = await runDsh(args, { cwd: dir, env: { DSH_HOME: home }, timeoutMs: 60_000 })
    expect(result.stderr, result.stderr).toContain('helper reader names MCP servers (mcpServers:), which do not start without the MCP client: add - name: "@dsh/mcp" to your config (or enable it)')
  })
})
