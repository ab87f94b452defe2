#!/usr/bin/env node
import { parseArgs } from 'node:util'
import { CompositionError } from './compose.js'
import { runCommand, UsageError } from './run.js'

const USAGE = `usage: dsh <command> [options]

commands:
  run [--config FILE] [--model SPEC] [--session-dir DIR] [--resume ID] [--json] [--quiet] PROMPT
      run one turn of an agent to completion and print its answer
  acp [--config FILE] [--model SPEC] [--session-dir DIR]
      serve a dsh agent over the Agent Client Protocol on stdio

model specs: scripted:PATH (keyless, plays a script), deepseek:MODEL (DEEPSEEK_API_KEY),
             openai:MODEL (OPENAI_API_KEY)`

async function main(argv: string[]): Promise<number> {
  const [command, ...rest] = argv
  switch (command) {
    case 'run':
      return runVerb(rest)
    case 'acp':
      return (await import('./acp.js')).acpVerb(rest)
    case undefined:
    case 'help':
    case '--help':
    case '-h':
      process.stdout.write(`${USAGE}\n`)
      return command === undefined ? 2 : 0
    default:
      process.stderr.write(`dsh: unknown command "${command}"\n${USAGE}\n`)
      return 2
  }
}

async function runVerb(args: string[]): Promise<number> {
  const { values, positionals } = parseArgs({
    args,
    allowPositionals: true,
    options: {
      config: { type: 'string' },
      model: { type: 'string' },
      'session-dir': { type: 'string' },
      resume: { type: 'string' },
      json: { type: 'boolean', default: false },
      quiet: { type: 'boolean', default: false },
      verbose: { type: 'boolean', default: false },
    },
  })
  const prompt = positionals.join(' ').trim()
  if (!prompt) throw new UsageError('dsh run: a PROMPT is required')
  return runCommand({
    prompt,
    config: values.config,
    model: values.model,
    sessionDir: values['session-dir'],
    resume: values.resume,
    json: values.json,
    quiet: values.quiet,
    verbose: values.verbose,
  })
}

// A reader that goes away (`dsh run ... | head`) is not an error worth a stack trace.
process.stdout.on('error', (error: NodeJS.ErrnoException) => {
  if (error.code === 'EPIPE') process.exit(process.exitCode ?? 0)
  throw error
})

main(process.argv.slice(2)).then(
  (code) => {
    process.exitCode = code
  },
  (error: unknown) => {
    if (error instanceof UsageError || error instanceof CompositionError || (error instanceof Error && error.name === 'TypeError' && 'code' in error && String((error as { code: unknown }).code).startsWith('ERR_PARSE_ARGS'))) {
      process.stderr.write(`${error.message}\n`)
      process.exitCode = 2
    } else {
      process.stderr.write(`dsh: ${error instanceof Error ? error.stack ?? error.message : String(error)}\n`)
      process.exitCode = 1
    }
  },
)
