/**
 * dsh outside its clone. Every workspace is packed, and the tarballs are installed by npm
 * into empty projects in a temporary directory (third-party packages from npm's cache,
 * offline: see installed.ts): locally, globally (`-g --prefix`), with the optional Codex and Claude Agent SDKs beside
 * them, as the embed example's dependencies, and once with one tarball left out. Then
 * every verb runs from there. Each test is one step; its name says which failed.
 */
import { spawn, type ChildProcess } from 'node:child_process'
import { existsSync, readdirSync, readFileSync, renameSync, writeFileSync } from 'node:fs'
import { delimiter, join, relative } from 'node:path'
import { PassThrough, Readable, Writable } from 'node:stream'
import { client, methods, ndJsonStream, PROTOCOL_VERSION } from '@agentclientprotocol/sdk'
import { startLoopbackServer } from '@dsh/testkit'
import { afterAll, beforeAll, describe, expect, it } from 'vitest'
import { repoRoot, tempDir } from './cli.js'
import { cleanEnv, embedProject, emptyProject, installedPackages, MB, npm, packWorkspaces, removeInBackground, run, treeSize, type Ran } from './installed.js'
import { until } from './processes.js'

const manifest = (path: string) => JSON.parse(readFileSync(join(repoRoot, path, 'package.json'), 'utf8')) as { version: string; engines: { node: string }; peerDependencies: Record<string, string> }
const version = manifest('.').version
const codexPackage = `@openai/codex@${manifest('packages/subagent/subagent-codex').peerDependencies['@openai/codex']}`
const claudePackage = `@anthropic-ai/claude-agent-sdk@${manifest('packages/subagent/subagent-claude-code').peerDependencies['@anthropic-ai/claude-agent-sdk']}`
/**
 * A Node older than `engines`: this machine's Node, made to report that version by a module
 * preloaded through NODE_OPTIONS (so the installed bin, started as a user starts it, reads it),
 * rather than a real old Node fetched from the registry while tests run.
 */
const OLD_NODE = '20.18.0'
/** Left out of one install: npm must say it is missing. */
const LEFT_OUT = '@dsh/tool-bash'
/** The tests' fake servers and harness: no package of the release depends on it, so a user's install never has it. */
const TESTKIT = '@dsh/testkit'
/** A workspace's tarball file name (`dsh-tool-bash-0.1.0.tgz`), as npm pack names it. */
const tarballOf = (name: string) => `${name.replace('@', '').replace('/', '-')}-${version}.tgz`

const scratch = tempDir('dsh-installed-')
const app = join(scratch, 'app')
const globalPrefix = join(scratch, 'global')
const full = join(scratch, 'full')
const embed = join(scratch, 'embed')
const home = join(scratch, 'home')
let tarballs: string[] = []
/** What a user installs: every tarball but testkit's. */
let release: string[] = []
let partialInstall: Ran | undefined

const started: ChildProcess[] = []
// The scratch installs hold about a gigabyte (the optional SDKs' binaries): removing them on a
// loaded machine can outlast any hook timeout, so it happens in the background and never fails the suite.
afterAll(async () => {
  for (const child of started) if (child.exitCode === null && child.signalCode === null) child.kill('SIGKILL')
  await removeInBackground(scratch, 20_000)
}, 30_000)

beforeAll(async () => {
  tarballs = await packWorkspaces(join(scratch, 'packs'))
  // Offline, npm fails the install if any package of the release needed the one left out.
  release = tarballs.filter((tarball) => !tarball.endsWith(`/${tarballOf(TESTKIT)}`))
  const withoutOne = release.filter((tarball) => !tarball.endsWith(`/${tarballOf(LEFT_OUT)}`))
  await Promise.all([
    npm('npm install of the release', ['install', ...release], emptyProject(app)),
    npm('npm install -g of the release', ['install', '-g', '--prefix', globalPrefix, ...release], scratch),
    npm('npm install of the release with the optional SDKs', ['install', ...release, codexPackage, claudePackage], emptyProject(full)),
    npm('npm install of examples/embed', ['install'], embedProject(embed, tarballs)),
    installWithoutOne(withoutOne).then((result) => (partialInstall = result)),
  ])
}, 600_000)

/**
 * npm install of the tarballs but one, as a user whose registry lacks it: @dsh/* is looked up
 * on a registry on loopback that has nothing (the public one is never asked), third-party
 * packages come from the cache the other installs use.
 */
async function installWithoutOne(tarballs: string[]): Promise<Ran> {
  const emptyRegistry = await startLoopbackServer(async (_req, res) => {
    res.writeHead(404, { 'content-type': 'application/json' }).end('{"error":"Not found"}')
  })
  try {
    return await run('npm', ['install', ...tarballs, '--no-audit', '--no-fund', '--prefer-offline', `--@dsh:registry=${emptyRegistry.origin}/`], { cwd: emptyProject(join(scratch, 'partial')), timeoutMs: 300_000 })
  } finally {
    await emptyRegistry.close()
  }
}

/** The installed `dsh` of `project`, run there with a private DSH_HOME (`home` unless given). */
function dsh(args: string[], options: { project?: string; env?: NodeJS.ProcessEnv; timeoutMs?: number } = {}): Promise<Ran> {
  const project = options.project ?? app
  return run(join(project, 'node_modules', '.bin', 'dsh'), args, { cwd: project, env: cleanEnv({ DSH_HOME: home, DSH_CODE_CACHE: join(home, 'cache'), ...options.env }), timeoutMs: options.timeoutMs ?? 60_000 })
}

function file(name: string, text: string): string {
  const path = join(scratch, name)
  writeFileSync(path, text)
  return path
}

const childScript = () => file('child.yml', '- reply:\n    - text: "Paris."\n')
const delegating = (tool: string) => file(`parent-${tool}.yml`, `- when: { depth: 0 }\n  reply:\n    - call: { tool: ${tool}, args: { description: "ask", prompt: "capital of France?" } }\n    - text: "the child said: {{last_tool_result}}"\n`)

/** Every file under `dir`. */
function filesUnder(dir: string): string[] {
  return readdirSync(dir, { recursive: true, withFileTypes: true }).filter((entry) => entry.isFile()).map((entry) => join(entry.parentPath, entry.name))
}

/** A JavaScript stack frame: what no error shown to a user may contain. */
const STACK_FRAME = /^\s+at .+[:(]\d+:\d+\)?$/m

// Each step starts real processes on a machine that runs other test files at once: generous limits.
describe('the packed release, installed outside the repository', { timeout: 180_000 }, () => {
  it('every tarball carries LICENSE, README, declarations and the sources its source maps name', async () => {
    const license = readFileSync(join(repoRoot, 'LICENSE'), 'utf8')
    expect(license).toMatch(/^MIT License\n/)
    expect(tarballs.length).toBe(readdirSync(join(repoRoot, 'packages')).flatMap((group) => readdirSync(join(repoRoot, 'packages', group))).length)
    for (const tarball of tarballs) {
      const listed = (await run('tar', ['tzf', tarball], { cwd: scratch })).stdout.split('\n')
      expect(listed, tarball).toEqual(expect.arrayContaining(['package/LICENSE', 'package/README.md', 'package/package.json', 'package/dist/index.d.ts', 'package/src/index.ts']))
      expect((await run('tar', ['xzOf', tarball, 'package/LICENSE'], { cwd: scratch })).stdout, tarball).toBe(license)
    }
    const maps = filesUnder(join(app, 'node_modules', '@dsh')).filter((path) => path.endsWith('.map'))
    expect(maps.length).toBeGreaterThan(100)
    for (const map of maps) {
      const { sources } = JSON.parse(readFileSync(map, 'utf8')) as { sources: string[] }
      for (const source of sources) expect(existsSync(join(map, '..', source)), `${map} names ${source}`).toBe(true)
    }
  })

  it('no installed file names the repository, and the bundle reaches no file outside @dsh/cli by a relative path', () => {
    for (const path of filesUnder(join(app, 'node_modules', '@dsh'))) expect(readFileSync(path, 'utf8').includes(repoRoot), path).toBe(false)
    const bundleDir = join(app, 'node_modules', '@dsh', 'cli', 'dist', 'bundle')
    const relativeFiles = [...readFileSync(join(bundleDir, 'dsh-main.cjs'), 'utf8').matchAll(/__dshFileUrl\("([^"]+)"\)/g)].map((match) => match[1])
    expect(relativeFiles.length).toBeGreaterThan(0)
    for (const path of relativeFiles) expect(relative(join(app, 'node_modules', '@dsh', 'cli'), join(bundleDir, path)), path).not.toMatch(/^\.\./)
  })

  // The bound guards against a heavy SDK slipping into the default install. It was 60 MB
  // until @dsh/llm-anthropic made the Anthropic SDK (about 19 MB) a default dependency, as the
  // OpenAI SDK is: Claude models at the root need no second install (72.9 MB measured then).
  it('the default install has neither the Codex nor the Claude Code SDK, and its node_modules hold less than 85 MB', () => {
    const modules = join(app, 'node_modules')
    for (const name of ['@openai/codex', '@anthropic-ai/claude-agent-sdk', `@openai/codex-${process.platform}-${process.arch}`, `@anthropic-ai/claude-agent-sdk-${process.platform}-${process.arch}`]) {
      expect(existsSync(join(modules, name)), name).toBe(false)
    }
    const { bytes, onDisk } = treeSize(modules)
    console.log(`default install: node_modules holds ${(bytes / MB).toFixed(1)} MB in files (${(onDisk / MB).toFixed(1)} MB on disk), ${installedPackages(modules).length} packages`)
    expect(bytes).toBeLessThan(85 * MB)
  })

  it(`${TESTKIT} is not part of an install: the release installed without it (offline, so a package needing it would have failed), and no install holds it`, () => {
    const cli = JSON.parse(readFileSync(join(app, 'node_modules', '@dsh', 'cli', 'package.json'), 'utf8')) as { dependencies: Record<string, string> }
    expect(Object.keys(cli.dependencies)).not.toContain(TESTKIT)
    for (const modules of [join(app, 'node_modules'), join(globalPrefix, 'lib', 'node_modules'), join(full, 'node_modules')]) {
      expect(existsSync(join(modules, '@dsh', 'cli')), modules).toBe(true)
      expect(installedPackages(modules).filter((name) => name === TESTKIT), modules).toEqual([])
    }
  })

  it('dsh --version prints the version every package has', async () => {
    expect(await dsh(['--version'])).toMatchObject({ code: 0, stdout: `${version}\n`, stderr: '' })
  })

  it('dsh --help lists every verb', async () => {
    const result = await dsh(['--help'])
    expect(result.code).toBe(0)
    for (const verb of ['run', 'demo', 'acp', 'a2a serve', 'sessions', 'config check', '--version']) expect(result.stdout).toContain(verb)
  })

  it('dsh run answers with a scripted model', async () => {
    expect(await dsh(['run', '--quiet', '--model', `scripted:${childScript()}`, 'capital of France?'])).toMatchObject({ code: 0, stdout: 'Paris.\n' })
  })

  it('without a model, dsh run and dsh acp point to dsh demo and name nothing only the clone has (npm start, examples/)', async () => {
    for (const verb of [['run', 'hello'], ['acp']]) {
      const result = await dsh(verb)
      expect(result.code, verb[0]).toBe(2)
      expect(result.stderr, verb[0]).toContain('no model to run with')
      expect(result.stderr, verb[0]).toContain('dsh demo')
      expect(result.stderr, verb[0]).not.toMatch(/npm start|examples\//)
    }
  })

  it('dsh config check composes the defaults', async () => {
    const result = await dsh(['config', 'check'])
    expect(result.code).toBe(0)
    expect(result.stdout).toMatch(/^ok: \d+ plugins; .*subagent providers: spawn, fork/m)
  })

  it('dsh acp serves the official ACP SDK client: initialize, a session, a prompt answered', async () => {
    const child = spawn(join(app, 'node_modules', '.bin', 'dsh'), ['acp', '--model', `scripted:${childScript()}`], { cwd: app, env: cleanEnv({ DSH_HOME: home }), stdio: ['pipe', 'pipe', 'pipe'] })
    started.push(child)
    let stderr = ''
    child.stderr!.on('data', (chunk: Buffer) => (stderr += chunk))
    const exited = new Promise<number | null>((resolve) => child.on('close', (code) => resolve(code)))
    const stdout = new PassThrough()
    child.stdout!.pipe(stdout)
    const { agent } = client({ name: 'install-check' }).connect(ndJsonStream(Writable.toWeb(child.stdin!) as WritableStream<Uint8Array>, Readable.toWeb(stdout) as ReadableStream<Uint8Array>))
    expect((await agent.request(methods.agent.initialize, { protocolVersion: PROTOCOL_VERSION, clientCapabilities: {} })).protocolVersion).toBe(PROTOCOL_VERSION)
    const session = await agent.buildSession(scratch).start()
    const answer = session.prompt('capital of France?')
    let text = ''
    for (;;) {
      const message = await session.nextUpdate()
      if (message.kind === 'stop') break
      if (message.update.sessionUpdate === 'agent_message_chunk' && message.update.content.type === 'text') text += message.update.content.text
    }
    expect(await answer).toMatchObject({ stopReason: 'end_turn' })
    expect(text).toBe('Paris.')
    child.stdin!.end()
    expect(await exited, stderr).toBe(0)
  })

  it('dsh run delegates to an installed dsh acp child', async () => {
    const config = file('acp.yml', [
      '- id: subagent-acp',
      '  name: "@dsh/subagent-acp"',
      `  config: { command: dsh, args: [acp, --model, "scripted:${childScript()}"], permission: reject }`,
      '- id: tool-subagent-acp',
      '  name: "@dsh/tool-subagent"',
      '  config: { provider: acp, toolName: subagent_acp }',
      '',
    ].join('\n'))
    const env = { PATH: [join(app, 'node_modules', '.bin'), cleanEnv().PATH].join(delimiter) }
    expect(await dsh(['run', '--quiet', '--config', config, '--model', `scripted:${delegating('subagent_acp')}`, 'go'], { env })).toMatchObject({ code: 0, stdout: 'the child said: Paris.\n' })
  })

  it('dsh a2a serve: its agent card is served, and a dsh run delegating through the a2a provider gets the answer', async () => {
    const child = spawn(join(app, 'node_modules', '.bin', 'dsh'), ['a2a', 'serve', '--port', '0', '--model', `scripted:${childScript()}`], { cwd: app, env: cleanEnv({ DSH_HOME: home }), stdio: ['ignore', 'pipe', 'pipe'] })
    started.push(child)
    let stdout = ''
    let stderr = ''
    child.stdout!.on('data', (chunk: Buffer) => (stdout += chunk))
    child.stderr!.on('data', (chunk: Buffer) => (stderr += chunk))
    const exited = new Promise<number | null>((resolve) => child.on('close', (code) => resolve(code)))
    await until(() => stdout.includes('\n'), () => (child.exitCode !== null ? `dsh a2a serve exited ${child.exitCode}: ${stderr}` : undefined))
    const url = stdout.trim()
    const card = (await (await fetch(`${url}/.well-known/agent-card.json`)).json()) as { name: string; version: string }
    expect(card).toMatchObject({ name: 'dsh', version })
    const config = file('a2a.yml', `- id: subagent-a2a\n  name: "@dsh/subagent-a2a"\n  config: { urls: ["${url}"] }\n- id: tool-subagent-a2a\n  name: "@dsh/tool-subagent"\n  config: { provider: a2a, toolName: subagent_a2a }\n`)
    expect(await dsh(['run', '--quiet', '--config', config, '--model', `scripted:${delegating('subagent_a2a')}`, 'go'])).toMatchObject({ code: 0, stdout: 'the child said: Paris.\n' })
    child.kill('SIGTERM')
    expect(await exited, stderr).toBe(0)
  })

  it('dsh sessions list and tree show the sessions of the runs above', async () => {
    const list = await dsh(['sessions', 'list'])
    expect(list.code).toBe(0)
    expect(list.stdout.trim().split('\n').length).toBeGreaterThanOrEqual(3)
    const tree = await dsh(['sessions', 'tree'])
    expect(tree.code).toBe(0)
    expect(tree.stdout).toMatch(/a2a "ask" {2}completed/)
  })

  it('dsh demo runs spawn, fork, acp and a background child, and names the two optional providers it left out and why', async () => {
    const result = await dsh(['demo', '--quiet'])
    expect(result.code, result.stderr).toBe(0)
    const summary = result.stdout.slice(result.stdout.indexOf('Summary:'))
    for (const provider of ['spawn', 'fork', 'acp']) expect(summary).toMatch(new RegExp(`^${provider} .* completed `, 'm'))
    expect(summary).not.toMatch(/^(codex|claude-code) /m)
    expect(result.stdout).toContain('Left out: codex and claude-code, whose packages are optional and not installed here:')
    expect(result.stdout).toContain(`npm install ${codexPackage}`)
    expect(result.stdout).toContain(`npm install ${claudePackage}`)
  })

  for (const [provider, name, install] of [['codex', '@dsh/subagent-codex', codexPackage], ['claude-code', '@dsh/subagent-claude-code', claudePackage]] as const) {
    it(`a composition naming ${provider} without its SDK fails at start-up in one line naming the package to install`, async () => {
      const config = file(`${provider}.yml`, `- id: subagent-${provider}\n  name: "${name}"\n- id: tool-subagent-${provider}\n  name: "@dsh/tool-subagent"\n  config: { provider: ${provider}, toolName: subagent_x }\n`)
      for (const verb of [['config', 'check'], ['run', '--model', `scripted:${childScript()}`, 'go']]) {
        const result = await dsh([...verb, '--config', config])
        expect(result.code).toBe(2)
        expect(result.stderr.trim().split('\n'), result.stderr).toHaveLength(1)
        expect(result.stderr).toContain(`npm install ${install}`)
      }
    })
  }

  it('npm install -g of the same tarballs puts a working dsh on PATH', async () => {
    const env = cleanEnv({ DSH_HOME: home, PATH: [join(globalPrefix, 'bin'), cleanEnv().PATH].join(delimiter) })
    expect(await run('dsh', ['--version'], { cwd: scratch, env })).toMatchObject({ code: 0, stdout: `${version}\n` })
    expect(await run('dsh', ['run', '--quiet', '--model', `scripted:${childScript()}`, 'capital?'], { cwd: scratch, env })).toMatchObject({ code: 0, stdout: 'Paris.\n' })
  })

  it('with Codex and the Claude Agent SDK installed beside it, dsh demo delegates to the real programs too', async () => {
    const result = await dsh(['demo', '--quiet'], { project: full, timeoutMs: 120_000 })
    expect(result.code, result.stderr).toBe(0)
    const summary = result.stdout.slice(result.stdout.indexOf('Summary:'))
    for (const provider of ['codex', 'claude-code']) expect(summary).toMatch(new RegExp(`^${provider} .* completed `, 'm'))
    expect(result.stdout).not.toContain('Left out')
  })

  it('the embed example compiles under strict, nodenext and skipLibCheck off, and runs keylessly', async () => {
    const build = await run('npm', ['run', 'build'], { cwd: embed, timeoutMs: 120_000 })
    expect(build.code, build.stdout + build.stderr).toBe(0)
    const started = await run('npm', ['start', '--silent'], { cwd: embed, env: cleanEnv({ DSH_HOME: home, TMPDIR: scratch }) })
    expect(started.code, started.stderr).toBe(0)
    expect(started.stdout).toMatch(/^subagent\/start {2}spawn child \S+ of \S+$/m)
    expect(started.stdout).toContain('direct delegation: completed: A child, started by the program itself.')
    expect(started.stdout).toContain('agent turn: completed: The child said: Paris.')
    expect(started.stdout.match(/^subagent\/end {4}spawn child \S+: completed$/gm)).toHaveLength(2)
  })

  it(`a tarball set without ${LEFT_OUT}: npm's error names it, with no stack trace`, () => {
    expect(partialInstall?.code).not.toBe(0)
    expect(partialInstall?.stderr).toContain(`'${LEFT_OUT}@${version}'`)
    expect(partialInstall?.stderr).not.toMatch(STACK_FRAME)
  })

  it('a @dsh package removed from an install: the verb that needs it fails in one line naming it', async () => {
    const installed = join(app, 'node_modules', '@dsh', 'a2a-server')
    renameSync(installed, `${installed}.away`)
    try {
      const result = await dsh(['a2a', 'serve', '--port', '0', '--model', `scripted:${childScript()}`])
      expect(result.code).toBe(2)
      expect(result.stderr.trim().split('\n'), result.stderr).toHaveLength(1)
      expect(result.stderr).toMatch(/^dsh: @dsh\/a2a-server is not installed next to @dsh\/cli; install the whole release/)
    } finally {
      renameSync(`${installed}.away`, installed)
    }
  })

  it(`Node ${OLD_NODE}, older than engines: one line naming the Node to upgrade to`, async () => {
    const preload = file('old-node.cjs', `Object.defineProperty(process.versions, 'node', { value: '${OLD_NODE}' })\n`)
    const env = cleanEnv({ DSH_HOME: home, NODE_OPTIONS: `--require ${preload}` })
    expect(await run('node', ['-p', 'process.versions.node'], { cwd: app, env })).toMatchObject({ stdout: `${OLD_NODE}\n` })
    const result = await run(join(app, 'node_modules', '.bin', 'dsh'), ['--version'], { cwd: app, env })
    expect(result).toMatchObject({ code: 2, stdout: '', stderr: `dsh: needs Node.js ${manifest('packages/cli/dsh').engines.node.replace('>=', '')} or later, but this is Node.js ${OLD_NODE}; upgrade Node.js\n` })
  })
})
