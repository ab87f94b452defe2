#!/usr/bin/env node
import { asksForHelp, isVerb, parseVerbArgs, USAGE, verbUsage } from './args.js'
import { configCheck } from './commands/config.js'
import { UsageError } from './errors.js'
import { reportFailure } from './exit.js'
import { exitWhenWritten } from './finish.js'
import { parseRunPermission } from './permission-prompt.js'
import { readPrompt } from './prompt-input.js'
import { runCommand } from './run.js'
import { cliVersion } from './version.js'

const COMMON = {
  config: { type: 'string' },
  model: { type: 'string' },
  'session-dir': { type: 'string' },
  verbose: { type: 'boolean', default: false },
} as const

async function main(argv: string[]): Promise<number> {
  const [command, ...rest] = argv
  if (isVerb(command) && asksForHelp(rest)) {
    process.stdout.write(`${verbUsage(command)}\n`)
    return 0
  }
  switch (command) {
    case 'run':
      return runVerb(rest)
    case 'chat':
      return (await import('./commands/chat.js')).chatVerb(rest)
    case 'acp':
      return (await import('./acp.js')).acpVerb(rest)
    case 'a2a':
      return (await import('./commands/a2a.js')).a2aVerb(rest)
    case 'mcp':
      return (await import('./commands/mcp.js')).mcpVerb(rest)
    case 'worker':
      return (await import('./commands/worker.js')).workerVerb(rest)
    case 'ui':
      return (await import('./commands/ui.js')).uiVerb(rest)
    case 'workflow':
      return (await import('./commands/workflow.js')).workflowVerb(rest)
    case 'demo':
      return (await import('./commands/demo.js')).demoVerb(rest)
    case 'sessions': {
      const { values, positionals } = parseVerbArgs('sessions', { args: rest, allowPositionals: true, options: { ...COMMON, usage: { type: 'boolean', default: false }, endpoint: { type: 'string' } } })
      const [verb, ...args] = positionals
      return (await import('./commands/sessions.js')).sessionsCommand(verb, args, { sessionDir: values['session-dir'], config: values.config, usage: values.usage, verbose: values.verbose, ...(values.endpoint !== undefined && { endpoint: values.endpoint }) })
    }
    case 'config': {
      const { values, positionals } = parseVerbArgs('config', { args: rest, allowPositionals: true, options: { ...COMMON, prompt: { type: 'boolean', default: false } } })
      if (positionals[0] !== 'check') throw new UsageError('USAGE', 'dsh config: the only verb is `check`')
      return configCheck({ config: values.config, model: values.model, sessionDir: values['session-dir'], prompt: values.prompt, verbose: values.verbose })
    }
    case 'agents': {
      const { values, positionals } = parseVerbArgs('agents', { args: rest, allowPositionals: true, options: COMMON })
      const [verb, ...args] = positionals
      return (await import('./commands/agents.js')).agentsCommand(verb, args, { config: values.config, model: values.model, verbose: values.verbose })
    }
    case 'trust':
      return (await import('./commands/trust.js')).trustVerb(rest)
    case 'workspaces': {
      const { values, positionals } = parseVerbArgs('workspaces', { args: rest, allowPositionals: true, options: { all: { type: 'boolean', default: false }, yes: { type: 'boolean', default: false }, dir: { type: 'string' } } })
      const [verb, ...args] = positionals
      return (await import('./commands/workspaces.js')).workspacesCommand(verb, args, { all: values.all === true, yes: values.yes === true, ...(values.dir !== undefined && { dir: values.dir }) })
    }
    case '--version':
      process.stdout.write(`${cliVersion()}\n`)
      return 0
    case undefined:
      // On a terminal, `dsh` alone opens a session; elsewhere it says how to use it, as before.
      if (process.stdin.isTTY && process.stdout.isTTY) return (await import('./commands/chat.js')).chatVerb([])
    // falls through
    case 'help':
    case '--help':
    case '-h':
      process.stdout.write(`${USAGE}\n`)
      return command === undefined ? 2 : 0
    default:
      // Options and no command (`dsh --resume`, `dsh --model SPEC`): a session's.
      if (command.startsWith('--')) return (await import('./commands/chat.js')).chatVerb(argv)
      process.stderr.write(`dsh: unknown command "${command}"\n${USAGE}\n`)
      return 2
  }
}

async function runVerb(args: string[]): Promise<number> {
  const { values, positionals } = parseVerbArgs('run', {
    args,
    allowPositionals: true,
    options: {
      ...COMMON,
      resume: { type: 'string' },
      json: { type: 'boolean', default: false },
      quiet: { type: 'boolean', default: false },
      'prompt-file': { type: 'string' },
      record: { type: 'string' },
      permission: { type: 'string' },
      ui: { type: 'boolean', default: false },
      stream: { type: 'boolean', default: false },
      'no-color': { type: 'boolean', default: false },
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
    ...(values.permission !== undefined && { permission: parseRunPermission(values.permission) }),
    ...(values.record !== undefined && { record: values.record }),
    ...(values.ui && { ui: true }),
    ...(values.stream && { stream: true }),
    ...(values['no-color'] && { color: false }),
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
