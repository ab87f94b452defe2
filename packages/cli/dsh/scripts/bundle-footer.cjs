// Appended to dsh-main.cjs by bundle.mjs: what its `import.meta.url` rewrites call.
/** A file of this package, by its path from the bundle's directory. */
function __dshFileUrl(fromBundle) { return require('node:url').pathToFileURL(require('node:path').join(__dirname, fromBundle)).href }
/** A file of another package, wherever npm installed that package: resolved from the bundle, once per package. */
function __dshPackageFileUrl(name, inPackage) {
  var dirs = __dshPackageFileUrl.dirs || (__dshPackageFileUrl.dirs = Object.create(null))
  var dir = dirs[name]
  if (dir === undefined) {
    try {
      dir = dirs[name] = require('node:path').dirname(require.resolve(name + '/package.json'))
    } catch (cause) {
      // One line the CLI prints as it is (code MODULE_NOT_FOUND): an incomplete install, not a bug.
      var error = new Error(name + ' is not installed next to @dsh/cli; install the whole release (every @dsh package of version ' + __dshVersion + ')', { cause: cause })
      error.code = 'MODULE_NOT_FOUND'
      throw error
    }
  }
  return require('node:url').pathToFileURL(require('node:path').join(dir, inPackage)).href
}
