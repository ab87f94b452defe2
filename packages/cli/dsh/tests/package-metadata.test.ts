/**
 * What makes each workspace a package a user can install: its manifest, its license, one
 * version for all. (That the tarballs install and run is tests/installed.test.ts.)
 */
import { execFileSync } from 'node:child_process'
import { cpSync, existsSync, readdirSync, readFileSync } from 'node:fs'
import { join, relative } from 'node:path'
import { describe, expect, it } from 'vitest'
import { repoRoot, tempDir } from './cli.js'

interface Manifest {
  name: string
  version: string
  private?: boolean
  description?: string
  license?: string
  repository?: { type: string; url: string; directory: string }
  engines?: { node: string }
  main?: string
  types?: string
  files?: string[]
  exports?: Record<string, string | Record<string, string>>
  dependencies?: Record<string, string>
  devDependencies?: Record<string, string>
  peerDependencies?: Record<string, string>
  peerDependenciesMeta?: Record<string, { optional?: boolean }>
}

function read(root: string, dir: string): Manifest {
  return JSON.parse(readFileSync(join(root, dir, 'package.json'), 'utf8')) as Manifest
}

function workspaceDirs(root: string): string[] {
  return readdirSync(join(root, 'packages')).flatMap((group) => readdirSync(join(root, 'packages', group)).map((name) => `packages/${group}/${name}`))
}

/** Every rule that ties the manifests of `root` together; one line per broken rule. */
function versionProblems(root: string): string[] {
  const { version } = read(root, '.')
  const problems: string[] = []
  const names = new Set<string>()
  for (const dir of workspaceDirs(root)) {
    const manifest = read(root, dir)
    names.add(manifest.name)
    if (manifest.version !== version) problems.push(`${manifest.name}: version ${manifest.version}, not ${version}`)
    for (const field of ['dependencies', 'devDependencies', 'peerDependencies'] as const) {
      for (const [name, spec] of Object.entries(manifest[field] ?? {})) if (name.startsWith('@dsh/') && spec !== version) problems.push(`${manifest.name}: ${field} ${name}@${spec}, not ${version}`)
    }
  }
  const embed = read(root, 'examples/embed')
  const tarballs = Object.entries(embed.dependencies ?? {}).filter(([name]) => name.startsWith('@dsh/'))
  if (tarballs.length !== names.size || tarballs.some(([name]) => !names.has(name))) problems.push(`examples/embed does not depend on exactly the ${names.size} workspaces`)
  for (const [name, spec] of tarballs) {
    if (spec !== `file:packs/${name.slice(1).replace('/', '-')}-${version}.tgz`) problems.push(`examples/embed: ${name} is ${spec}`)
  }
  return problems
}

describe('package manifests', () => {
  const root = read(repoRoot, '.')
  const dirs = workspaceDirs(repoRoot)

  it('every workspace is publishable: described, MIT, its repository folder, the root engines, public', () => {
    expect(dirs.length).toBeGreaterThan(20)
    for (const dir of dirs) {
      const manifest = read(repoRoot, dir)
      expect(manifest.private, manifest.name).toBeUndefined()
      expect(manifest.name).toMatch(/^@dsh\/[a-z0-9-]+$/)
      expect(manifest.description?.length, manifest.name).toBeGreaterThan(20)
      expect(manifest.license).toBe('MIT')
      expect(manifest.repository).toMatchObject({ type: 'git', directory: dir })
      expect(manifest.repository?.url).toBe(read(repoRoot, 'packages/cli/dsh').repository?.url)
      expect(manifest.engines).toEqual(root.engines)
    }
  })

  it('what the manifests point at is shipped: main, types and exports inside files, dist and src included', () => {
    for (const dir of dirs) {
      const manifest = read(repoRoot, dir)
      expect(manifest.files, manifest.name).toEqual(expect.arrayContaining(['dist', 'src']))
      const targets = [manifest.main, manifest.types, ...Object.values(manifest.exports ?? {}).flatMap((target) => (typeof target === 'string' ? [target] : Object.values(target)))]
      expect(manifest.exports?.['./package.json'], manifest.name).toBe('./package.json')
      for (const target of targets) {
        expect(target, manifest.name).toBeDefined()
        const top = target!.replace(/^\.\//, '').split('/')[0]
        expect(top === 'package.json' || manifest.files!.includes(top), `${manifest.name}: ${target} is outside files`).toBe(true)
        expect(existsSync(join(repoRoot, dir, target!)), `${manifest.name}: ${target}`).toBe(true)
      }
    }
  })

  it('the root LICENSE is MIT, and each package has the same file (npm packs it from the package folder)', () => {
    const license = readFileSync(join(repoRoot, 'LICENSE'), 'utf8')
    expect(license).toMatch(/^MIT License\n\nCopyright \(c\) \d{4} /)
    for (const dir of dirs) expect(readFileSync(join(repoRoot, dir, 'LICENSE'), 'utf8'), dir).toBe(license)
  })

  it('one version: every workspace, every @dsh dependency and the embed example\'s tarballs carry the root\'s, and CHANGELOG.md has its entry', () => {
    expect(versionProblems(repoRoot)).toEqual([])
    expect(readFileSync(join(repoRoot, 'CHANGELOG.md'), 'utf8')).toMatch(new RegExp(`^## ${root.version.replaceAll('.', '\\.')}\\b`, 'm'))
  })

  it('scripts/set-version.mjs moves every version together', () => {
    const copy = tempDir('dsh-versions-')
    for (const dir of ['.', 'examples/embed', ...dirs]) cpSync(join(repoRoot, dir, 'package.json'), join(copy, dir, 'package.json'))
    execFileSync(process.execPath, [join(repoRoot, 'scripts', 'set-version.mjs'), '9.8.7', '--root', copy], { stdio: 'pipe' })
    expect(read(copy, '.').version).toBe('9.8.7')
    expect(read(copy, 'packages/cli/dsh').dependencies?.['@dsh/base']).toBe('9.8.7')
    expect(versionProblems(copy)).toEqual([])
    const refused = (() => {
      try {
        execFileSync(process.execPath, [join(repoRoot, 'scripts', 'set-version.mjs'), 'next', '--root', copy], { stdio: 'pipe' })
        return undefined
      } catch (error) {
        return error as { status: number; stderr: Buffer }
      }
    })()
    expect(refused?.status).toBe(2)
    expect(refused?.stderr.toString()).toMatch(/^usage: /)
  })

  it('the executable names the oldest Node the engines allow', () => {
    const bin = readFileSync(join(repoRoot, 'packages/cli/dsh/bin/dsh.cjs'), 'utf8')
    expect(`>=${/var MINIMUM_NODE = '([\d.]+)'/.exec(bin)?.[1]}`).toBe(root.engines?.node)
  })

  it('the Codex and Claude Code SDKs are optional peers of their providers, which nothing depends on outright, and devDependencies of the monorepo; the Messages and MCP SDKs are dependencies only of their packages and the CLI', () => {
    const optional = { '@dsh/subagent-codex': '@openai/codex', '@dsh/subagent-claude-code': '@anthropic-ai/claude-agent-sdk' }
    for (const [provider, sdk] of Object.entries(optional)) {
      const manifest = read(repoRoot, dirs.find((dir) => read(repoRoot, dir).name === provider)!)
      expect(manifest.peerDependencies?.[sdk]).toMatch(/^\d+\.\d+\.\d+$/)
      expect(manifest.peerDependenciesMeta?.[sdk]).toEqual({ optional: true })
      expect(root.devDependencies?.[sdk]).toBe(manifest.peerDependencies?.[sdk])
    }
    for (const dir of dirs) {
      const { name, dependencies = {} } = read(repoRoot, dir)
      // The Messages SDK is a dependency only of the Anthropic adapter and of the CLI, which ships the adapter and keeps the SDK outside its bundle.
      const allowed = name === '@dsh/llm-anthropic' ? ['@anthropic-ai/sdk'] : name === '@dsh/mcp' || name === '@dsh/mcp-server' ? ['@modelcontextprotocol/sdk'] : name === '@dsh/cli' ? ['@anthropic-ai/sdk', '@modelcontextprotocol/sdk'] : []
      for (const sdk of [...Object.values(optional), '@anthropic-ai/sdk', '@modelcontextprotocol/sdk'].filter((sdk) => !allowed.includes(sdk))) expect(dependencies[sdk], `${name} depends on ${sdk}`).toBeUndefined()
      // The MCP SDK is a dependency only of the MCP client, the MCP server and the CLI, which ships both and keeps the SDK outside its bundle.
      for (const sdk of allowed) expect(dependencies[sdk], `${name} pins ${sdk} at the monorepo's version`).toBe(root.devDependencies?.[sdk])
    }
  })

  it('OpenTelemetry is an optional peer of @dsh/tracing (the CLI bundles it), pinned, a devDependency of the monorepo, and no package depends on it outright', () => {
    const manifest = read(repoRoot, dirs.find((dir) => read(repoRoot, dir).name === '@dsh/tracing')!)
    const otel = Object.keys(manifest.peerDependencies ?? {}).filter((name) => name.startsWith('@opentelemetry/'))
    expect(otel).toContain('@opentelemetry/api')
    expect(otel).toContain('@opentelemetry/exporter-trace-otlp-http')
    for (const name of otel) {
      expect(manifest.peerDependencies?.[name]).toMatch(/^\d+\.\d+\.\d+$/)
      expect(manifest.peerDependenciesMeta?.[name]).toEqual({ optional: true })
      expect(root.devDependencies?.[name]).toBe(manifest.peerDependencies?.[name])
    }
    for (const dir of dirs) {
      const { name, dependencies = {} } = read(repoRoot, dir)
      expect(Object.keys(dependencies).filter((dependency) => dependency.startsWith('@opentelemetry/')), `${name}'s dependencies`).toEqual([])
    }
  })

  it('a package whose declarations use Node\'s types names @types/node as an optional peer', () => {
    for (const dir of dirs) {
      const declarations = readdirSync(join(repoRoot, dir, 'dist'), { recursive: true, withFileTypes: true }).filter((entry) => entry.isFile() && entry.name.endsWith('.d.ts'))
      const usesNode = declarations.some((entry) => /NodeJS\.|from 'node:|import\("node:|\bBuffer\b/.test(readFileSync(join(entry.parentPath, entry.name), 'utf8')))
      const manifest = read(repoRoot, dir)
      if (usesNode) {
        expect(manifest.peerDependencies?.['@types/node'], `${manifest.name} (${relative(repoRoot, dir)})`).toBe(`>=${root.engines?.node.replace('>=', '')}`)
        expect(manifest.peerDependenciesMeta?.['@types/node']).toEqual({ optional: true })
      }
    }
  })
})
