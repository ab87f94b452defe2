#!/usr/bin/env node
import { createRequire } from 'node:module'
import { parseArgs } from 'node:util'
import { configCheck } from './commands/config.js'
import { sessionsCommand } from './commands/sessions.js'
import { UsageError } from './errors.js'
import { reportFailure } from './exit.js'
import { exitWhenWritten } from './finish.js'
import { readPrompt } from './prompt-input.js'
import { runCommand } from './run.js'

const USAGE = `usage: dsh <command> [options]

commands:
  run [--config FILE] [--model SPEC] [--session-dir DIR] [--resume ID] [--json] [--quiet]
      [--record DIR] (PROMPT | --prompt-file FILE | --prompt-file -)
      run a prompt to completion (with the turns its background work starts) and print
      the answer; --prompt-file reads the prompt from a file, - from standard input;
      --record DIR stores every session's model calls there (replay: --model replay:DIR)
  demo [--session-dir DIR] [--quiet]
      a keyless tour: one parent delegating through every provider, then a summary
  acp [--config FILE] [--model SPEC] [--session-dir DIR] [--max-depth N] [--record DIR] [--verbose]
      [--permission ask|allow|reject] [--max-frame-bytes N]
      serve a dsh agent over the Agent Client Protocol on stdio; sessions deeper than
      --max-depth (default 3) in a delegation chain are refused; side-effecting tools
      (bash) run only if the client allows each call (--permission, default ask)
  a2a serve [--host H] [--port P] [--token-env NAME] [--max-tasks N] [--max-depth N]
      [--public-url URL] [--config FILE] [--model SPEC] [--session-dir DIR]
      serve a dsh agent over the Agent2Agent protocol (HTTP, default 127.0.0.1:7700);
      each task is one session; any address but loopback needs --token-env
  sessions list | tree [ID] [--usage] | show ID   [--session-dir DIR] [--config FILE]
      stored sessions, their delegation lineage, and transcripts; show ends with the
      session's token usage (and cost, with a price table), tree --usage adds it per line
  config check [--config FILE] [--prompt]
      compose the plugins and print them, or the first configuration error; --prompt
      also prints the system prompt of a root agent and of a child

model specs: scripted:PATH (keyless, plays a script), deepseek:MODEL (DEEPSEEK_API_KEY),
             openai:MODEL (OPENAI_API_KEY), replay:DIR (keyless, plays a --record DIR)
config: --config FILE, else ./dsh.yml, else $DSH_HOME/config.yml (~/.dsh/config.yml)
dsh --version prints the version`

const COMMON = {
  config: { type: 'string' },
  model: { type: 'string' },
  'session-dir': { type: 'string' },
  verbose: { type: 'boolean', default: false },
} as const

async function main(argv: string[]): Promise<number> {
  const [command, ...rest] = argv
  switch (command) {
    case 'run':
      return runVerb(rest)
    case 'acp':
      return (await import('./acp.js')).acpVerb(rest)
    case 'a2a':
      return (await import('./commands/a2a.js')).a2aVerb(rest)
    case 'demo':
      return (await import('./commands/demo.js')).demoVerb(rest)
    case 'sessions': {
      const { values, positionals } = parseArgs({ args: rest, allowPositionals: true, options: { ...COMMON, usage: { type: 'boolean', default: false } } })
      const [verb, ...args] = positionals
      return sessionsCommand(verb, args, { sessionDir: values['session-dir'], config: values.config, usage: values.usage, verbose: values.verbose })
    }
    case 'config': {
      const { values, positionals } = parseArgs({ args: rest, allowPositionals: true, options: { ...COMMON, prompt: { type: 'boolean', default: false } } })
      if (positionals[0] !== 'check') throw new UsageError('USAGE', 'dsh config: the only verb is `check`')
      return configCheck({ config: values.config, model: values.model, sessionDir: values['session-dir'], prompt: values.prompt, verbose: values.verbose })
    }
    case '--version':
      process.stdout.write(`${(createRequire(import.meta.url)('../package.json') as { version: string }).version}\n`)
      return 0
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
      ...COMMON,
      resume: { type: 'string' },
      json: { type: 'boolean', default: false },
      quiet: { type: 'boolean', default: false },
      'prompt-file': { type: 'string' },
      record: { type: 'string' },
    },
  })
  const prompt = await readPrompt({ positionals, promptFile: values['prompt-file'] })
  return runCommand({
    prompt,
    config: values.config,
    model: values.model,
    sessionDir: values['session-dir'],
    resume: values.resume,
    json: values.json,
    quiet: values.quiet,
    verbose: values.verbose,
    ...(values.record !== undefined && { record: values.record }),
  })
}

// A reader that goes away (`dsh run ... | head`) is not an error worth a stack trace.
process.stdout.on('error', (error: NodeJS.ErrnoException) => {
  if (error.code === 'EPIPE') process.exit(process.exitCode ?? 0)
  throw error
})

main(process.argv.slice(2)).then(
  (code) => exitWhenWritten(code),
  (error: unknown) => {
    process.exitCode = reportFailure(error)
  },
)
