#!/usr/bin/env node
// The `dsh` executable. npm links it when it installs the workspace, before the `prepare`
// script has built the bundle it starts (dist/bundle/dsh.cjs), so it is a file of its own.
'use strict'
const { existsSync } = require('node:fs')
const { join } = require('node:path')

const launcher = join(__dirname, '..', 'dist', 'bundle', 'dsh.cjs')
if (!existsSync(launcher)) {
  process.stderr.write(`dsh: the CLI is not built (no ${launcher}); run \`npm run build\` in the repository\n`)
  process.exit(1)
}
require(launcher)
