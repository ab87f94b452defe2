/**
 * The command line of every verb: its usage text (what `dsh VERB --help` prints) and one
 * parser over `node:util`'s `parseArgs` that turns its errors into one line of ours. Node's
 * own messages quote unevenly (`as in '-- "--modle"`) and suggest nothing; ours name the
 * verb, the option, the nearest known option, and where the list is.
 */
import { parseArgs, type ParseArgsConfig } from 'node:util'
import { UsageError } from './errors.js'

export type Verb = 'run' | 'chat' | 'demo' | 'acp' | 'a2a' | 'mcp' | 'worker' | 'ui' | 'sessions' | 'config' | 'agents' | 'workspaces' | 'trust' | 'workflow'

const MODEL_SPECS = `model specs: scripted:PATH (keyless, plays a script), deepseek:MODEL (DEEPSEEK_API_KEY),
             openai:MODEL (OPENAI_API_KEY), anthropic:MODEL (ANTHROPIC_API_KEY), replay:DIR (keyless, plays a --record DIR),
             NAME:MODEL for an adapter configured in dsh.yml; llm.model sets the default`
const CONFIG_LOOKUP = `config: --config FILE, else ./dsh.yml once you trust it (dsh trust), else $DSH_HOME/config.yml (~/.dsh/config.yml);
        an untrusted or changed ./dsh.yml is refused, never used`

/** Each verb's synopsis and description, as `dsh --help` lists them and `dsh VERB --help` prints one. */
export const VERB_USAGE: Record<Verb, string> = {
  run: `run [--config FILE] [--model SPEC] [--session-dir DIR] [--resume ID] [--json] [--quiet]
      [--stream] [--no-color] [--record DIR] [--permission ask|allow|reject] [--ui]
      (PROMPT | --prompt-file FILE | --prompt-file -)
      run a prompt to completion (with the turns its background work starts) and print
      the answer (streamed on a terminal; in a pipe at the end, or with --stream every
      piece of text as it arrives; --json has the deltas; --no-color or NO_COLOR: no
      colour); --prompt-file reads the prompt from a file, - from standard input;
      --record DIR stores every session's model calls there (replay: --model replay:DIR);
      --resume ID continues a stored session (a unique tail of its id is enough) with the
      model it ran on unless --model says otherwise; --permission says who decides whether
      a side-effecting tool (bash) may run: ask (the default on a terminal) prompts for
      each call, allow runs them, reject (the default otherwise) refuses them; --ui serves
      the run's page on loopback (its URL, with its token, on stderr), where the tree shows
      live and, unless --permission is given, approval requests are answered`,
  chat: `chat [--config FILE] [--model SPEC] [--session-dir DIR] [--resume [ID]] [--permission ask|allow|reject] [--record DIR] [--no-color]
      an interactive session on a terminal (also dsh with no command, or only these options):
      a prompt line with history, each answer streamed with its tool calls and live tree,
      approvals asked inline, Ctrl-C cancels a turn, /help lists the slash commands
      (/tree, /cost, /tasks, /agents, /model, /resume, /clear, /exit); --resume goes on
      with a stored session (without ID the newest), which dsh run --resume also reaches.
      Without a terminal the prompts come from standard input, one a line (a line ending
      in \\ goes on to the next), each answer streamed to stdout; approvals as dsh run's in
      a pipe (reject unless --permission allow); exit 1 if anything failed`,
  demo: `demo [--session-dir DIR] [--quiet]
      a keyless tour: one parent delegating through every provider, then a summary`,
  acp: `acp [--config FILE] [--model SPEC] [--session-dir DIR] [--max-depth N] [--record DIR] [--verbose]
      [--permission ask|allow|reject] [--max-frame-bytes N]
      serve a dsh agent over the Agent Client Protocol on stdio; sessions deeper than
      --max-depth (default 3) in a delegation chain are refused; side-effecting tools
      (bash) run only if the client allows each call (--permission, default ask)`,
  a2a: `a2a serve [--host H] [--port P] [--token-env NAME] [--max-tasks N] [--max-depth N]
      [--public-url URL] [--webhook-allow PATTERN]... [--webhook-allow-network CIDR]...
      [--permission ask|allow|reject] [--approver-token-env NAME | --trust-caller-approvals]
      [--config FILE] [--model SPEC] [--session-dir DIR]
      serve a dsh agent over the Agent2Agent protocol (HTTP, default 127.0.0.1:7700);
      each context is one session; any address but loopback needs --token-env; push
      notifications go only to URLs matching a --webhook-allow pattern
      (https://hooks.example.com/a2a, https://*.example.com:*), and to loopback or
      private addresses only inside a --webhook-allow-network; a side-effecting tool
      (bash) no approval rule decides is asked through input-required (--permission
      ask, the default) of the approver, whose answers carry the token in
      --approver-token-env, or of the task's caller with --trust-caller-approvals, and
      is rejected with neither; or allowed or refused unasked (allow, reject)`,
  mcp: `mcp serve [--http [--host H] [--port P] [--token-env NAME]] [--max-calls N] [--max-depth N]
      [--permission ask|allow|reject] [--config FILE] [--model SPEC] [--session-dir DIR] [--verbose]
      serve dsh's helpers as MCP tools (and "delegate", a plain dsh agent), each taking { prompt }:
      on stdio, or with --http on Streamable HTTP at http://127.0.0.1:PORT/mcp (port 0: a free
      one; the URL is printed), any address but loopback needs --token-env, and so does
      --permission ask over HTTP (else any local process could approve its own); at most
      --max-calls calls run at once (default the config's subagents tree.maxConcurrent, else 4),
      its tree.maxQueued (else 64) more wait, more are refused; a side effect no approval rule
      decides is asked of the client through elicitation (--permission ask, the default) and
      rejected where it cannot ask, or allowed or refused unasked (allow, reject)
    mcp list [--json] [--config FILE]
      the MCP servers the config's @dsh/mcp entry names (and ./.mcp.json's with projectMcpJson)
      and the helpers' own inline ones, each started and its tools listed within its
      startTimeoutMs, then stopped`,
  worker: `worker [--queue NAME]... [--concurrency N] [--redis-env NAME] [--key-env NAME] [--max-depth N]
      [--lock-ms MS] [--config FILE] [--model SPEC] [--session-dir DIR]
      take delegations from BullMQ queues on Redis (default queue "dsh"; the URL is read
      from $DSH_REDIS_URL or the variable --redis-env names) and run each as a session;
      with --key-env, only jobs signed with the key in that variable (the parent's
      keyEnv) run; without, whoever can write to the Redis decides what jobs run; a worker that dies has its jobs taken over by another after --lock-ms (default 30000)`,
  ui: `ui [--port P] [--session-dir DIR] [--host H --token-env NAME]
      the delegation trees of a session directory in a browser, live: prints the page's
      URL (loopback, with the token every request needs); another address needs a token`,
  sessions: `sessions list | tree [ID] [--usage] | show ID | trace ID [--endpoint URL]   [--session-dir DIR] [--config FILE]
      stored sessions, their delegation lineage, and transcripts; show ends with the
      session's token usage (and cost, with a price table), tree --usage adds it per line;
      trace writes a stored tree as one OpenTelemetry trace (OTLP/JSON) to stdout, or
      sends it to the collector at --endpoint`,
  config: `config check [--config FILE] [--prompt]
      compose the plugins and print them, or the first configuration error; --prompt
      also prints the system prompt of a root agent and of a child; an untrusted
      ./dsh.yml is checked without loading its code, and refused`,
  agents: `agents list | show NAME   [--config FILE] [--model SPEC]
      the helpers defined in files (./.dsh/agents, ~/.dsh/agents, dirs in config): list
      prints each one's provider, model and file, the names one file shadows and any
      problem (exit 2); show prints the system prompt and tools its child would get`,
  workspaces: `workspaces list | merge ID | discard ID [--yes] | clean [--all [--yes]]   [--dir DIR]
      the workspaces children were given (worktrees on dsh/ branches, copies): list shows
      each one's child, branch, directory and state, and those a killed run left behind
      (orphaned); merge ID brings a kept one's changes (committed or not) into the
      directory it was made from, or lists the conflicting files and changes nothing;
      discard ID throws one away; clean removes the orphaned ones, --all every one (their
      branches too); what would lose changes is asked on a terminal, else needs --yes`,
  workflow: `workflow run FILE [--json] [--max-concurrent N] [--budget KEY=N,...] [--resume ID] [--permission allow|reject] [--model SPEC] [--config FILE] [--session-dir DIR] [--record DIR]
      run a workflow module (.js/.mjs; default export async ({ agent, parallel, bestOf }) => result):
      each agent() call a child of one root session, shown as the live tree; prints the result
      (--json: as one JSON object); --resume ID goes on with a stopped run, reusing finished calls`,
  trust: `trust [DIR] | trust --list | trust --remove DIR
      let dsh use DIR/dsh.yml (default: this directory's) when started there: a
      project's config is refused until you trust it, and again whenever its content
      changes (a git pull); the list is $DSH_HOME/trusted-configs.json`,
}

const MODEL_VERBS: ReadonlySet<Verb> = new Set(['run', 'chat', 'acp', 'a2a', 'mcp', 'worker', 'config', 'agents'])

export const USAGE = `usage: dsh <command> [options]   (dsh <command> --help for one; dsh alone on a terminal: dsh chat)

commands:
${Object.values(VERB_USAGE)
  .map((text) => `  ${text}`)
  .join('\n')}

${MODEL_SPECS}
${CONFIG_LOOKUP}
dsh --version prints the version`

export function verbUsage(verb: Verb): string {
  return `usage: dsh ${VERB_USAGE[verb]}${MODEL_VERBS.has(verb) ? `\n\n${MODEL_SPECS}\n${CONFIG_LOOKUP}` : ''}`
}

export function isVerb(word: string | undefined): word is Verb {
  return word !== undefined && Object.hasOwn(VERB_USAGE, word)
}

/** Whether `args` ask for help: `--help` or `-h` before any `--` (after it, they are a prompt's words). */
export function asksForHelp(args: readonly string[]): boolean {
  const end = args.indexOf('--')
  return (end === -1 ? args : args.slice(0, end)).some((arg) => arg === '--help' || arg === '-h')
}

/** `parseArgs` for `verb`, with a usage error of ours for anything it refuses. */
export function parseVerbArgs<T extends ParseArgsConfig & { options: NonNullable<ParseArgsConfig['options']> }>(verb: string, config: T): ReturnType<typeof parseArgs<T>> {
  try {
    return parseArgs(config)
  } catch (error) {
    throw argumentError(verb, Object.keys(config.options), error)
  }
}

function argumentError(verb: string, known: readonly string[], error: unknown): unknown {
  if (!(error instanceof Error) || !('code' in error)) return error
  const help = `dsh ${verb} --help lists the options`
  switch (error.code) {
    case 'ERR_PARSE_ARGS_UNKNOWN_OPTION': {
      const option = /'([^']*)'/.exec(error.message)?.[1] ?? '?'
      const near = nearestOption(option, known)
      return new UsageError('USAGE', `dsh ${verb}: unknown option ${option}${near ? `; did you mean --${near}?` : ''} (${help}${verb === 'run' ? '; a prompt that starts with - goes after --' : ''})`, { cause: error })
    }
    case 'ERR_PARSE_ARGS_INVALID_OPTION_VALUE': {
      const option = /'(-{1,2}[^' ]+)/.exec(error.message)?.[1] ?? 'an option'
      return new UsageError('USAGE', `dsh ${verb}: ${option} ${/argument missing/.test(error.message) ? 'needs a value' : 'takes no value'} (${help})`, { cause: error })
    }
    case 'ERR_PARSE_ARGS_UNEXPECTED_POSITIONAL': {
      const word = /'([^']*)'/.exec(error.message)?.[1] ?? ''
      return new UsageError('USAGE', `dsh ${verb}: unexpected argument ${JSON.stringify(word)} (dsh ${verb} --help says what it takes)`, { cause: error })
    }
    default:
      return error
  }
}

/** The known option closest to `typed` (`--modle` → `model`), if one is close enough to be a typo. */
export function nearestOption(typed: string, known: readonly string[]): string | undefined {
  const bare = typed.replace(/^-+/, '').split('=')[0]!
  let best: string | undefined
  let bestDistance = Infinity
  for (const name of known) {
    const distance = editDistance(bare, name)
    if (distance < bestDistance) [best, bestDistance] = [name, distance]
  }
  // A third of the name (at least one edit) may be wrong; beyond that it is another word.
  return best !== undefined && bestDistance <= Math.max(1, Math.floor(best.length / 3)) ? best : undefined
}

/** Optimal string alignment distance: insertions, deletions, substitutions and adjacent swaps. */
function editDistance(a: string, b: string): number {
  const rows = Array.from({ length: a.length + 1 }, (_, i) => [i, ...Array<number>(b.length).fill(0)])
  for (let j = 1; j <= b.length; j++) rows[0]![j] = j
  for (let i = 1; i <= a.length; i++) {
    for (let j = 1; j <= b.length; j++) {
      const cost = a[i - 1] === b[j - 1] ? 0 : 1
      let value = Math.min(rows[i - 1]![j]! + 1, rows[i]![j - 1]! + 1, rows[i - 1]![j - 1]! + cost)
      if (i > 1 && j > 1 && a[i - 1] === b[j - 2] && a[i - 2] === b[j - 1]) value = Math.min(value, rows[i - 2]![j - 2]! + 1)
      rows[i]![j] = value
    }
  }
  return rows[a.length]![b.length]!
}

/** A whole-number option of `verb` (`dsh a2a serve`, `dsh worker`), checked against its range; `undefined` when not given. */
export function wholeNumberOption(verb: string, flag: string, raw: string | undefined, min: number, max = Number.MAX_SAFE_INTEGER): number | undefined {
  if (raw === undefined) return undefined
  const value = Number(raw)
  if (!/^\d+$/.test(raw) || value < min || value > max) throw new UsageError('USAGE', `${verb}: ${flag} must be a whole number from ${min} to ${max} (got "${raw}")`)
  return value
}
