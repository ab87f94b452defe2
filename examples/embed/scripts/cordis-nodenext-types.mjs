// Cordis 4.0.0-rc.10 publishes declarations whose relative imports carry no file extension
// (`export * from './context'`). TypeScript's nodenext resolution refuses those in an ES
// module package (TS2834), so a nodenext project sees no export of `cordis` at all, and
// nothing typed on a Context (upstream: cordiverse/cordis#124, fixed there but not yet
// released). This adds the `.js` each specifier needs to the installed declarations, in
// place. It touches only `.d.ts` files, never code, and finds nothing to change once Cordis
// ships declarations with extensions. Run by `npm run build` before tsc.
import { readdirSync, readFileSync, writeFileSync } from 'node:fs'
import { createRequire } from 'node:module'
import { dirname, join } from 'node:path'

const lib = join(dirname(createRequire(import.meta.url).resolve('cordis/package.json')), 'lib')
// `from './x'`, `import('./x')` and `declare module './x'`: a relative specifier without an extension.
const relative = /((?:from|import\(|declare module)\s*)(['"])(\.\.?(?:\/[\w.-]+)*?)(\/)?\2/g
let changed = 0
for (const name of readdirSync(lib).filter((file) => file.endsWith('.d.ts'))) {
  const file = join(lib, name)
  const before = readFileSync(file, 'utf8')
  const after = before.replace(relative, (whole, head, quote, path, slash) => {
    if (/\.(c|m)?js$/.test(path)) return whole
    changed += 1
    // `'.'` and `'./dir/'` name a directory's index file.
    return `${head}${quote}${path === '.' || path === '..' || slash ? `${path}/index.js` : `${path}.js`}${quote}`
  })
  if (after !== before) writeFileSync(file, after)
}
console.log(changed ? `cordis: added the file extension to ${changed} relative imports of its declarations (${lib})` : 'cordis: its declarations already name their files')
