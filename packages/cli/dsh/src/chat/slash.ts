/**
 * The slash commands of `dsh chat`: what a user reaches for between turns. Each reads the
 * session through `ChatHost` and writes its answer to the terminal; none starts a turn. An
 * unknown one is answered with the nearest known name (the same distance rule as a
 * mistyped option, `nearestOption`), never sent to the model.
 */
import { printable } from '@dsh/base'
import type { SessionHeader } from '@dsh/session'
import { nearestOption } from '../args.js'
import type { Composition } from '../compose.js'
import { tree } from '../commands/sessions.js'

/** What a slash command may read and change of the running session. */
export interface ChatHost {
  readonly runtime: Composition
  /** The session's id (its root agent's). */
  readonly sessionId: string
  /** The model spec turns run on. */
  readonly model: string | undefined
  /** A line for the user (to stdout, between turns). */
  say(line: string): void
  /** Go on in another stored session (`undefined`: a new one), on `model` when given. */
  switchTo(sessionId: string | undefined, model?: string): Promise<void>
  /** Check that a model spec can be used here; throws a one-line error when it cannot. */
  checkModel(spec: string): Promise<void>
  /** The stored session an id or a unique tail of it names (throws a one-line error). */
  resolveSession(wanted: string): Promise<string>
}

export interface SlashCommand {
  name: string
  /** Its argument, as `/help` shows it. */
  argument?: string
  summary: string
  run(host: ChatHost, argument: string): Promise<'exit' | void>
}

const RECENT_SESSIONS = 10

export const SLASH_COMMANDS: readonly SlashCommand[] = [
  {
    name: 'help',
    summary: 'these commands and the keys',
    run: async (host) => {
      const width = Math.max(...SLASH_COMMANDS.map((command) => `/${command.name}${command.argument ? ` ${command.argument}` : ''}`.length))
      for (const command of SLASH_COMMANDS) host.say(`  ${`/${command.name}${command.argument ? ` ${command.argument}` : ''}`.padEnd(width)}  ${command.summary}`)
      host.say('  Enter sends; \\ at the end of a line (or Alt-Enter) starts another; Up and Down: earlier prompts')
      host.say('  Ctrl-C cancels a running turn or clears the line; twice at an empty prompt, or Ctrl-D, leaves')
    },
  },
  {
    name: 'tree',
    summary: 'this session\'s delegation tree, as stored',
    run: async (host) => void (await storedTree(host, false)),
  },
  {
    name: 'cost',
    summary: 'tokens (and cost, with a price table) per child and in all',
    run: async (host) => void (await storedTree(host, true)),
  },
  {
    name: 'tasks',
    summary: 'the background tasks of this session',
    run: async (host) => {
      const tasks = host.runtime.ctx.get('tasks')?.list(host.sessionId) ?? []
      if (tasks.length === 0) return host.say('no background tasks')
      for (const task of tasks) host.say(printable(`${task.id}  ${task.kind}  ${task.status}${task.detail ? ` (${task.detail})` : ''}  ${task.label}`))
    },
  },
  {
    name: 'agents',
    summary: 'the providers children start through; continuable children',
    run: async (host) => {
      const subagents = host.runtime.ctx.get('subagents')
      host.say(`providers: ${subagents?.list().join(', ') || 'none'}`)
      const children = (await subagents?.listDescendants(host.sessionId)) ?? []
      if (children.length === 0) return host.say('no continuable children')
      for (const child of children) host.say(printable(`${'  '.repeat(child.depth)}${child.childId}  ${child.provider} "${child.label}"  ${child.state}, ${child.turns} ${child.turns === 1 ? 'turn' : 'turns'}`))
    },
  },
  {
    name: 'model',
    argument: '[SPEC]',
    summary: 'the model in use; with SPEC, go on with that one',
    run: async (host, spec) => {
      if (!spec) return host.say(`model: ${host.model ?? 'none (give one: /model SPEC)'}`)
      await host.checkModel(spec)
      await host.switchTo(host.sessionId, spec)
      host.say(`model: ${spec}`)
    },
  },
  {
    name: 'resume',
    argument: '[ID]',
    summary: 'recent sessions; with ID (or its tail), go on in that one',
    run: async (host, wanted) => {
      if (wanted) {
        const id = await host.resolveSession(wanted)
        await host.switchTo(id)
        return host.say(`resumed session ${id}`)
      }
      const roots = (await host.runtime.ctx.sessions.listStored()).filter((header) => header.parentSession === undefined).sort(newestFirst).slice(0, RECENT_SESSIONS)
      if (roots.length === 0) return host.say('no stored sessions')
      for (const header of roots) host.say(printable(`${header.id === host.sessionId ? '*' : ' '} ${header.id}  ${header.createdAt}${header.label ? `  "${header.label}"` : ''}`))
      host.say('/resume ID goes on in one (a unique tail of its id is enough)')
    },
  },
  {
    name: 'clear',
    summary: 'start a new session (this one stays stored)',
    run: async (host) => {
      const previous = host.sessionId
      await host.switchTo(undefined)
      host.say(`new session ${host.sessionId} (the last one: /resume ${previous})`)
    },
  },
  {
    name: 'exit',
    summary: 'leave (dsh --resume goes on with this session)',
    run: async () => 'exit',
  },
]

export function newestFirst(a: SessionHeader, b: SessionHeader): number {
  return b.createdAt.localeCompare(a.createdAt)
}

/** A line starting with `/` as a command and its argument, or why it is none. */
export function parseSlash(line: string): { command: SlashCommand; argument: string } | { problem: string } {
  const [word = '', ...rest] = line.trim().slice(1).split(/\s+/)
  const command = SLASH_COMMANDS.find((candidate) => candidate.name === word)
  if (command) return { command, argument: rest.join(' ') }
  const near = nearestOption(word, SLASH_COMMANDS.map((candidate) => candidate.name))
  const shown = printable(word.length > 40 ? `${word.slice(0, 40)}…` : word)
  return { problem: `dsh: no command /${shown}${near ? `; did you mean /${near}?` : ''} (/help lists them; a prompt starting with / goes after a space)` }
}

/** `/tree` and `/cost`: `dsh sessions tree` of this session, with usage per line for `/cost`. */
async function storedTree(host: ChatHost, withUsage: boolean): Promise<number> {
  const { sessions, llm } = host.runtime.ctx
  return tree(await sessions.listStored(), host.sessionId, (id) => sessions.readStored(id), withUsage ? llm.prices : undefined)
}
