#!/usr/bin/env node
// The `dsh` executable. npm links it when it installs the workspace, before the `prepare`
// script has built the bundle it starts (dist/bundle/dsh.cjs), so it is a file of its own.
// It is also the first code an older Node runs, so it is written for any Node: it says
// which Node dsh needs instead of failing somewhere inside the bundle.
'use strict'
var fs = require('fs')
var path = require('path')

// The oldest Node dsh runs on: `engines.node` in package.json (a test keeps them equal).
var MINIMUM_NODE = '20.19'
var have = process.versions.node.split('.').map(Number)
var need = MINIMUM_NODE.split('.').map(Number)
if (have[0] < need[0] || (have[0] === need[0] && have[1] < need[1])) {
  process.stderr.write('dsh: needs Node.js ' + MINIMUM_NODE + ' or later, but this is Node.js ' + process.versions.node + '; upgrade Node.js\n')
  process.exit(2)
}

var launcher = path.join(__dirname, '..', 'dist', 'bundle', 'dsh.cjs')
if (!fs.existsSync(launcher)) {
  process.stderr.write('dsh: the CLI is not built (no ' + launcher + '); run `npm run build` in the repository\n')
  process.exit(1)
}
require(launcher)
