// Moves every version together: `node scripts/set-version.mjs 0.2.0` sets the version of
// the root and of every workspace, every `@dsh/*` dependency between them, and the tarball
// names examples/embed depends on; then run `npm install` to bring the lockfile along and
// add the release's entry to CHANGELOG.md. `--root DIR` works on another copy of the tree.
import { existsSync, readdirSync, readFileSync, writeFileSync } from 'node:fs'
import { dirname, join } from 'node:path'
import { fileURLToPath } from 'node:url'
import { parseArgs } from 'node:util'

const { values, positionals } = parseArgs({ allowPositionals: true, options: { root: { type: 'string' } } })
const [version] = positionals
if (!version || !/^\d+\.\d+\.\d+(-[0-9A-Za-z.-]+)?$/.test(version)) {
  console.error('usage: node scripts/set-version.mjs VERSION [--root DIR]   (VERSION like 0.2.0)')
  process.exit(2)
}
const root = values.root ?? join(dirname(fileURLToPath(import.meta.url)), '..')

function update(file, change) {
  const manifest = JSON.parse(readFileSync(file, 'utf8'))
  change(manifest)
  writeFileSync(file, `${JSON.stringify(manifest, null, 2)}\n`)
}

const workspaces = readdirSync(join(root, 'packages')).flatMap((group) =>
  readdirSync(join(root, 'packages', group)).map((name) => join(root, 'packages', group, name, 'package.json')).filter((file) => existsSync(file)),
)
update(join(root, 'package.json'), (manifest) => (manifest.version = version))
for (const file of workspaces) {
  update(file, (manifest) => {
    manifest.version = version
    for (const field of ['dependencies', 'devDependencies', 'peerDependencies']) {
      for (const name of Object.keys(manifest[field] ?? {})) if (name.startsWith('@dsh/')) manifest[field][name] = version
    }
  })
}
update(join(root, 'examples', 'embed', 'package.json'), (manifest) => {
  manifest.version = version
  for (const [name, spec] of Object.entries(manifest.dependencies)) {
    if (name.startsWith('@dsh/')) manifest.dependencies[name] = spec.replace(/-\d+\.\d+\.\d+(-[0-9A-Za-z.-]+)?\.tgz$/, `-${version}.tgz`)
  }
})
console.log(`version ${version}: the root, ${workspaces.length} workspaces and examples/embed; now run npm install and add the CHANGELOG.md entry`)
