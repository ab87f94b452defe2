/**
 * Helper definitions' MCP servers (`mcpServers:` of `@dsh/agent-definitions`): the inline
 * servers of the user's definitions start beside the user's own; a project's definition
 * starts none unless the user's config says projectHelperServers: true, and says so naming
 * its file; ctx.mcpServers hands a name's entry to a child program, never a server this
 * process would not start.
 */
import { mkdirSync, writeFileSync } from 'node:fs'
import { join } from 'node:path'
import { afterEach, describe, expect, it } from 'vitest'
import { createHarness } from '@dsh/testkit/harness'
import { AgentDefinitionsService } from '@dsh/agent-definitions'
import McpPlugin, { type McpConfig } from '@dsh/mcp'
import { FIXTURE, tempDir, cleanUp } from './mcp-harness.js'

let disposeHarness: (() => Promise<void>) | undefined
afterEach(async () => {
  await disposeHarness?.()
  disposeHarness = undefined
  await cleanUp()
})

const inline = (server: string, env: Record<string, string> = {}, more = '') =>
  `  - ${server}: { command: ${JSON.stringify(process.execPath)}, args: [${JSON.stringify(FIXTURE)}], env: ${JSON.stringify(env)}${more} }`

function define(dir: string, name: string, mcpServers: string[]): string {
  mkdirSync(dir, { recursive: true })
  const file = join(dir, `${name}.md`)
  writeFileSync(file, `---\nname: ${name}\ndescription: Uses servers.\nmcpServers:\n${mcpServers.join('\n')}\n---\nDo it.\n`)
  return file
}

async function start(config: Partial<McpConfig>, dirs: { cwd: string; home: string }) {
  const harness = await createHarness({ script: [{ reply: [{ text: 'done' }] }] })
  disposeHarness = () => harness.dispose()
  const warnings: string[] = []
  harness.ctx.logger.exporter({ colors: 0, levels: { default: 2 }, export: (message) => void warnings.push(String(message.args.join(' '))) } as Parameters<typeof harness.ctx.logger.exporter>[0])
  await harness.plugin(AgentDefinitionsService, { cwd: dirs.cwd, home: dirs.home, user: true, project: true })
  await harness.plugin(McpPlugin, config)
  const tools = harness.ctx.tools.list().filter((name) => name.startsWith('mcp__')).sort()
  return { harness, warnings, tools }
}

describe("helper definitions' MCP servers", () => {
  it("starts the user's definitions' inline servers; a project's definition starts none and says which file and what to set", async () => {
    const root = await tempDir()
    const cwd = join(root, 'project')
    const home = join(root, 'home')
    define(join(home, 'agents'), 'docs', [inline('docs'), '  - own'])
    const projectFile = define(join(cwd, '.dsh', 'agents'), 'cloned', [inline('cloned')])
    const { tools, warnings } = await start({ servers: { own: { command: process.execPath, args: [FIXTURE] } } }, { cwd, home })
    expect(tools.filter((name) => name.endsWith('__echo'))).toEqual(['mcp__docs__echo', 'mcp__own__echo'])
    expect(warnings.filter((line) => line.includes('cloned'))).toEqual([
      `${projectFile}:4: helper "cloned": its inline MCP server "cloned" is not started, since a project's definition may not start programs unless your config allows it; to run it, set projectHelperServers: true in the @dsh/mcp entry of your own config`,
    ])
  })

  it("starts a project's definition's inline server when the user's config sets projectHelperServers: true, never reading dsh's environment for it", async () => {
    const root = await tempDir()
    const cwd = join(root, 'project')
    const home = join(root, 'home')
    define(join(cwd, '.dsh', 'agents'), 'cloned', [inline('cloned', { KEY: '${DSH_TEST_SECRET}' })])
    process.env.DSH_TEST_SECRET = 'hunter2'
    try {
      const { tools, harness } = await start({ projectHelperServers: true }, { cwd, home })
      expect(tools).toContain('mcp__cloned__echo')
      expect(harness.ctx.mcpServers.resolve('cloned')!.config).toMatchObject({ env: { KEY: '${DSH_TEST_SECRET}' } })
    } finally {
      delete process.env.DSH_TEST_SECRET
    }
  })

  it("resolves a name to the entry a child program is handed: the user's variables read, a project's server not allowed or an unknown name nothing", async () => {
    const root = await tempDir()
    const cwd = join(root, 'project')
    const home = join(root, 'home')
    define(join(home, 'agents'), 'docs', [inline('docs', { TOKEN: '${DSH_TEST_SECRET}' })])
    define(join(cwd, '.dsh', 'agents'), 'cloned', [inline('cloned')])
    process.env.DSH_TEST_SECRET = 'hunter2'
    try {
      const { harness, warnings } = await start({ servers: { api: { type: 'http', url: 'http://127.0.0.1:9/mcp', headers: { Authorization: 'Bearer ${DSH_TEST_SECRET}' } } } }, { cwd, home })
      const table = harness.ctx.mcpServers
      expect(table.resolve('docs')).toEqual({ name: 'docs', config: { command: process.execPath, args: [FIXTURE], env: { TOKEN: 'hunter2' } } })
      expect(table.resolve('api')).toEqual({ name: 'api', config: { type: 'http', url: 'http://127.0.0.1:9/mcp', headers: { Authorization: 'Bearer hunter2' } } })
      expect(table.resolve('cloned')).toBeUndefined()
      expect(table.resolve('nowhere')).toBeUndefined()
      // The http server is not listening: its tools are left out with a warning, and nothing else is.
      expect(warnings.some((line) => line.startsWith('MCP server "api"'))).toBe(true)
    } finally {
      delete process.env.DSH_TEST_SECRET
    }
  })

  it('warns naming the helper when it names a server no config has, and when two definitions give one name two servers', async () => {
    const root = await tempDir()
    const cwd = join(root, 'project')
    const home = join(root, 'home')
    const a = define(join(home, 'agents'), 'a', [inline('docs'), '  - missing'])
    const b = define(join(home, 'agents'), 'b', [inline('docs', { OTHER: '1' })])
    const { warnings, tools } = await start({}, { cwd, home })
    expect(tools).toContain('mcp__docs__echo')
    expect(warnings).toContain(`${a}:4: helper "a" names MCP server "missing", which is not in the servers of your @dsh/mcp entry; its child runs without it`)
    expect(warnings).toContain(`${b}:4: helper "b": its inline MCP server "docs" differs from the one of the same name in ${a}, which is used; give one of them another name`)
  })

  it("trusts readOnlyHints: true only in a user's own definition: a project's read-only tool stays a side effect the broker decides", async () => {
    const root = await tempDir()
    const cwd = join(root, 'project')
    const home = join(root, 'home')
    define(join(home, 'agents'), 'docs', [inline('docs', {}, ', readOnlyHints: true')])
    define(join(cwd, '.dsh', 'agents'), 'cloned', [inline('cloned', {}, ', readOnlyHints: true')])
    const { harness } = await start({ projectHelperServers: true }, { cwd, home })
    expect(harness.ctx.tools.get('mcp__docs__echo')!.sideEffecting).toBe(false)
    expect(harness.ctx.tools.get('mcp__docs__note')!.sideEffecting).toBe(true)
    expect(harness.ctx.tools.get('mcp__cloned__echo')!.sideEffecting).toBe(true)
  })
})
