import { FileToolError } from './errors.js'

/**
 * A glob as a regular expression over `/`-separated relative paths: `**` any number of
 * directories, `*` and `?` within one name, `{a,b}` alternatives, `[abc]` / `[!abc]` a
 * character class. Written here rather than taken from Node, whose `path.matchesGlob` is
 * still experimental on Node 20. Linear: the result has no nested repetition.
 */
export function globToRegExp(glob: string): RegExp {
  let source = ''
  let braces = 0
  for (let at = 0; at < glob.length; at++) {
    const char = glob[at]!
    if (char === '*') {
      if (glob[at + 1] === '*') {
        const slashAfter = glob[at + 2] === '/'
        const atStart = at === 0 || glob[at - 1] === '/'
        at += slashAfter ? 2 : 1
        // `**/` at a name boundary: zero or more whole directories; `**` elsewhere: anything.
        source += atStart && slashAfter ? '(?:[^/]*/)*' : '.*'
      } else {
        source += '[^/]*'
      }
    } else if (char === '?') {
      source += '[^/]'
    } else if (char === '[') {
      const close = glob.indexOf(']', at + 2)
      if (close === -1) throw new FileToolError('BAD_PATTERN', `the glob ${glob} has a [ without its ]`)
      let body = glob.slice(at + 1, close)
      const negated = body.startsWith('!') || body.startsWith('^')
      if (negated) body = body.slice(1)
      source += `[${negated ? '^/' : ''}${body.replace(/[\\\]]/g, '\\$&')}]`
      at = close
    } else if (char === '{') {
      braces++
      source += '(?:'
    } else if (char === '}' && braces > 0) {
      braces--
      source += ')'
    } else if (char === ',' && braces > 0) {
      source += '|'
    } else {
      source += char.replace(/[.+^${}()|\\]/g, '\\$&')
    }
  }
  if (braces > 0) throw new FileToolError('BAD_PATTERN', `the glob ${glob} has a { without its }`)
  return new RegExp(`^${source}$`)
}

/**
 * A file filter as ripgrep's `--glob` reads one: a glob with a `/` matches the path
 * relative to where the search starts, one without matches the file's name anywhere.
 */
export function fileFilter(glob: string): (relativePath: string) => boolean {
  const regexp = globToRegExp(glob.startsWith('/') ? glob.slice(1) : glob)
  if (glob.includes('/')) return (path) => regexp.test(path)
  return (path) => regexp.test(path.slice(path.lastIndexOf('/') + 1))
}
