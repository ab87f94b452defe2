/**
 * `dsh mcp list` through the built CLI: the servers of the config's @dsh/mcp entry (the MCP
 * client's test fixture, a real process), each started within its deadline, its tools
 * listed, then stopped; one that does not start says why; `--json` has the same.
 */
import { mkdirSync, writeFileSync } from 'node:fs'
import { join } from 'node:path'
import { describe, expect, it } from 'vitest'
import { repoRoot, runDsh, tempDir } from './cli.js'

const FIXTURE = join(repoRoot, 'packages/mcp/mcp/tests/fixtures/server.mjs')

/** A config naming the fixture as `srv`, the fixture refusing to start as `broken`, and an http server whose header names an unset variable. */
function config(): { dir: string; file: string } {
  const dir = tempDir('dsh-mcp-list-')
  const node = JSON.stringify(process.execPath)
  const fixture = JSON.stringify(FIXTURE)
  const file = join(dir, 'dsh.yml')
  writeFileSync(file, [
    '- name: "@dsh/mcp"',
    '  config:',
    '    servers:',
    `      srv: { command: ${node}, args: [${fixture}], env: { TOKEN: "not shown" } }`,
    `      broken: { command: ${node}, args: [${fixture}, --exit-at-start] }`,
    '      web: { type: http, url: "http://127.0.0.1:9/mcp", headers: { Authorization: "Bearer ${DSH_TEST_UNSET_TOKEN}" } }',
    '',
  ].join('\n'))
  return { dir, file }
}

describe('dsh --help', () => {
  it('lists the mcp command with both its verbs, as dsh mcp --help prints it', async () => {
    const all = await runDsh(['--help'], { cwd: repoRoot })
    expect(all.code, all.stderr).toBe(0)
    expect(all.stdout).toContain('  mcp serve [--http [--host H] [--port P] [--token-env NAME]]')
    expect(all.stdout).toContain('    mcp list [--json] [--config FILE]')
    const one = await runDsh(['mcp', '--help'], { cwd: repoRoot })
    expect(one.code, one.stderr).toBe(0)
    expect(one.stdout).toMatch(/^usage: dsh mcp serve /)
  })
})

describe('dsh mcp list', () => {
  it('lists each configured server with its state and tools (as agents call them), says why one did not start, and exits 1 for it', async () => {
    const { dir, file } = config()
    const result = await runDsh(['mcp', 'list', '--config', file], { cwd: dir, timeoutMs: 30_000 })
    expect(result.code, result.stderr).toBe(1)
    const lines = result.stdout.split('\n')
    expect(lines[0]).toBe(`srv: stdio ${process.execPath} ${FIXTURE}`)
    expect(lines[1]).toBe('  ready, 13 tools')
    expect(lines).toContain('    mcp__srv__echo (read-only hint)  Echo the text back.')
    expect(lines).toContain('    mcp__srv__note  Write a line to the call log.')
    expect(lines).toContain('    mcp__srv__bad name!  "bad name!" has characters model APIs do not accept in a tool name (letters, digits, "_" and "-" only)')
    expect(result.stdout).toContain('broken: stdio')
    expect(result.stdout).toContain('  failed: MCP server "broken" (the mcp entry) did not start: the server exited with code 3: fixture: refusing to start on purpose\n')
    expect(result.stdout).toContain('web: http http://127.0.0.1:9/mcp\n  failed: the mcp entry: servers.web.headers.Authorization names ${DSH_TEST_UNSET_TOKEN}, which is not set')
    // An entry's environment values and headers may hold keys: never shown.
    expect(result.stdout).not.toContain('not shown')
  })

  it('--json has every server, its state, error and tools', async () => {
    const { dir, file } = config()
    const result = await runDsh(['mcp', 'list', '--json', '--config', file], { cwd: dir, timeoutMs: 30_000 })
    expect(result.code, result.stderr).toBe(1)
    const listed = JSON.parse(result.stdout) as { servers: { name: string; state: string; error?: string; tools: { fullName: string; readOnlyHint: boolean }[] }[] }
    expect(listed.servers.map((server) => [server.name, server.state])).toEqual([
      ['srv', 'ready'],
      ['broken', 'failed'],
      ['web', 'failed'],
    ])
    expect(listed.servers[0]!.tools).toContainEqual({ name: 'echo', fullName: 'mcp__srv__echo', description: 'Echo the text back.', readOnlyHint: true })
    expect(listed.servers[1]!.error).toMatch(/exited with code 3/)
  })

  it('with no @dsh/mcp entry says so and exits 0', async () => {
    const dir = tempDir('dsh-mcp-list-')
    writeFileSync(join(dir, 'dsh.yml'), '- id: approvals\n  name: "@dsh/approvals"\n')
    const result = await runDsh(['mcp', 'list', '--config', join(dir, 'dsh.yml')], { cwd: dir })
    expect(result.code, result.stderr).toBe(0)
    expect(result.stdout).toMatch(/^no MCP servers are configured in .*dsh\.yml: a @dsh\/mcp entry with servers: adds them/)
  })

  it("lists a helper's own inline server (from its file) though the config has no @dsh/mcp entry, and dsh agents show names the helper's servers", async () => {
    const dir = tempDir('dsh-mcp-list-')
    const home = join(dir, 'home')
    mkdirSync(join(home, 'agents'), { recursive: true })
    const file = join(home, 'agents', 'reader.md')
    const server = `{ command: ${JSON.stringify(process.execPath)}, args: [${JSON.stringify(FIXTURE)}] }`
    writeFileSync(file, `---\nname: reader\ndescription: Reads.\nmcpServers:\n  - own: ${server}\n  - absent\n---\nYou read.\n`)
    writeFileSync(join(dir, 'dsh.yml'), '- id: approvals\n  name: "@dsh/approvals"\n')
    const listed = await runDsh(['mcp', 'list', '--config', join(dir, 'dsh.yml')], { cwd: dir, env: { DSH_HOME: home }, timeoutMs: 30_000 })
    expect(listed.code, listed.stderr).toBe(0)
    expect(listed.stdout).toContain(`own (from ${file} (helper reader)): stdio ${process.execPath} ${FIXTURE}\n  ready, 13 tools`)
    const shown = await runDsh(['agents', 'show', 'reader', '--config', join(dir, 'dsh.yml'), '--model', `scripted:${join(repoRoot, 'examples/hello.yml')}`], { cwd: dir, env: { DSH_HOME: home }, timeoutMs: 30_000 })
    expect(shown.stdout, shown.stderr).toContain('mcp servers: own (inline), absent (named, not started here)')
  })

  it("refuses a ./dsh.yml the user has not trusted, as a run does (its servers are not started)", async () => {
    // The config is the directory's own ./dsh.yml, which nobody trusted.
    const { dir } = config()
    const result = await runDsh(['mcp', 'list'], { cwd: dir })
    expect(result.code).not.toBe(0)
    expect(result.stderr).toContain('not using')
    expect(result.stdout).toBe('')
  })
})
