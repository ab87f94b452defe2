// Appended to dsh-main.cjs by bundle.mjs: what its `import.meta.url` rewrites call.
/** A file of this package, by its path from the bundle's directory. */
function __dshFileUrl(fromBundle) { return require('node:url').pathToFileURL(require('node:path').join(__dirname, fromBundle)).href }
/**
 * A file of another package, wherever npm installed that package: found from the bundle,
 * once per package, where `require.resolve(name + '/package.json')` finds it (Node's lookup
 * paths for the name, the first that holds the package, its real path). Looked up here
 * rather than through `require.resolve`: resolving a package that has an exports map loads
 * Node's ESM resolver, about 2 ms of the start of every run that composes such a package
 * (a provider it may never use). Every package bundled here exports its package.json.
 */
function __dshPackageFileUrl(name, inPackage) {
  var dirs = __dshPackageFileUrl.dirs || (__dshPackageFileUrl.dirs = Object.create(null))
  var dir = dirs[name]
  if (dir === undefined) {
    try {
      dir = dirs[name] = __dshPackageDir(name)
    } catch (cause) {
      // One line the CLI prints as it is (code MODULE_NOT_FOUND): an incomplete install, not a bug.
      var error = new Error(name + ' is not installed next to @dsh/cli; install the whole release (every @dsh package of version ' + __dshVersion + ')', { cause: cause })
      error.code = 'MODULE_NOT_FOUND'
      throw error
    }
  }
  return require('node:url').pathToFileURL(require('node:path').join(dir, inPackage)).href
}
/** The real directory of installed package `name`, by Node's lookup paths from the bundle; throws (MODULE_NOT_FOUND) when none holds it. */
function __dshPackageDir(name) {
  var path = require('node:path')
  var fs = require('node:fs')
  var bases = require.resolve.paths(name) || []
  for (var i = 0; i < bases.length; i++) {
    var manifest = path.join(bases[i], name, 'package.json')
    if (fs.existsSync(manifest)) return fs.realpathSync(path.dirname(manifest))
  }
  var error = new Error("Cannot find package '" + name + "' from " + __dirname)
  error.code = 'MODULE_NOT_FOUND'
  throw error
}
