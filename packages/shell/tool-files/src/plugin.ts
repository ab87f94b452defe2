import { Service, type Context } from 'cordis'
import Schema from 'schemastery'
import type { ToolAgent, ToolExecution, ToolOutput } from '@dsh/tools'
import { LOCAL_FILE_ACCESS, type FileAccess, type FileAccessRouter } from './access.js'
import { FileToolError } from './errors.js'
import { grepTool, ripgrepOnPath, type GrepArgs, type GrepEngine } from './grep.js'
import { GREP_MODES } from './grep-job.js'
import { globFiles, listDirectory, type GlobArgs } from './listing.js'
import { confinementOf, type Confinement } from './paths.js'
import { readFileTool, type ReadArgs } from './read.js'
import { refusal } from './render.js'
import { editFileTool, writeFileTool, type EditArgs, type WriteArgs } from './write.js'

declare module 'cordis' {
  interface Context {
    files: FilesToolPlugin
  }
}

export interface FilesToolConfig {
  /** Directories beyond the agent's cwd the tools may read and (outside a sandbox) write. */
  allowedDirectories: string[]
  maxFileBytes: number
  readDefaultLines: number
  maxLineChars: number
  maxOutputChars: number
  maxResults: number
  maxWalkEntries: number
  grepTimeoutMs: number
  ripgrep: boolean
}

/** The tools this package registers, in the order a model's tool list shows them. */
export const FILE_TOOL_NAMES = ['read', 'write', 'edit', 'glob', 'grep', 'ls'] as const

const path = (description: string) => ({ type: 'string', minLength: 1, description })
const WRITE_PATH = 'The file, relative to the working directory (src/app.ts: no ./, no .., no links; an absolute path only for an allowed directory outside it). Permission rules match this name.'

/**
 * The model-facing file tools over the calling agent's session cwd: `read`, `glob`, `grep`
 * and `ls` look; `write` and `edit` change files and are `sideEffecting`, so each call is
 * put to `@dsh/tools`' permission gates (the approval broker, with the path as subject)
 * before it runs. Every path resolves by real path inside the cwd or a configured
 * directory; under the session's `sandbox` only the cwd is writable.
 *
 * It is also `ctx.files`, whose one method, `addRouter`, lets a host read and write some
 * agents' files through another `FileAccess` (`access.ts`; `dsh acp`: its client's `fs`).
 */
export class FilesToolPlugin extends Service {
  static inject = ['tools']
  static Config: Schema<FilesToolConfig> = Schema.object({
    allowedDirectories: Schema.array(Schema.string()).default([]).description('Directories beyond the working directory the tools may read and write (relative ones from the working directory). A sandboxed agent still writes only in its working directory.'),
    maxFileBytes: Schema.natural().min(1).default(10 * 1024 * 1024).description('Largest file read, edited or written; larger ones are refused by their size.'),
    readDefaultLines: Schema.natural().min(1).default(2000).description('Lines read returns when the call gives no limit.'),
    maxLineChars: Schema.natural().min(16).default(2000).description('Longer lines are cut in read and grep results.'),
    maxOutputChars: Schema.natural().min(256).default(50_000).description('Largest result of read and grep, in characters.'),
    maxResults: Schema.natural().min(1).default(500).description('Entries ls shows and files glob returns.'),
    maxWalkEntries: Schema.natural().min(1).default(200_000).description('Entries glob and the fallback grep look at before they stop.'),
    grepTimeoutMs: Schema.natural().min(1).default(30_000).description('A search still running after this is stopped and refused.'),
    ripgrep: Schema.boolean().default(true).description('Search with ripgrep (rg) when it is on PATH; false: always the built-in search.'),
  })

  private readonly engine: GrepEngine

  /** Most recent last; the first (from the end) that picks an access serves the call. */
  private routers: FileAccessRouter[] = []

  constructor(ctx: Context, private readonly options: FilesToolConfig) {
    super(ctx, 'files')
    const config = options
    const program = config.ripgrep ? ripgrepOnPath() : undefined
    this.engine = program ? { kind: 'ripgrep', program } : { kind: 'fallback' }
    const { tools } = ctx
    tools.register<ReadArgs>({
      name: 'read',
      description: `Read a text file, its lines numbered (up to ${config.readDefaultLines} lines unless limit says otherwise; long lines cut). Paths are relative to the working directory. Binary files and files over ${config.maxFileBytes} bytes are refused.`,
      parameters: {
        type: 'object',
        properties: {
          path: path('The file, relative to the working directory (or absolute).'),
          offset: { type: 'integer', minimum: 1, description: 'The first line to read (1-based).' },
          limit: { type: 'integer', minimum: 1, description: 'How many lines to read.' },
        },
        required: ['path'],
        additionalProperties: false,
      },
      concurrencySafe: true,
      execute: (args, exec) => this.run('read', exec, (confinement) => readFileTool(confinement, args, { maxFileBytes: config.maxFileBytes, defaultLines: config.readDefaultLines, maxLineChars: config.maxLineChars, maxOutputChars: config.maxOutputChars }, this.accessFor(exec.agent), exec.signal)),
    })
    tools.register<WriteArgs>({
      name: 'write',
      description: 'Create a file or replace its whole content (missing directories are created). To change part of a file use edit.',
      parameters: {
        type: 'object',
        properties: { path: path(WRITE_PATH), content: { type: 'string', description: 'The whole new content.' } },
        required: ['path', 'content'],
        additionalProperties: false,
      },
      // It changes files: the permission gates (the approval broker) decide first, with the path as subject.
      sideEffecting: true,
      execute: (args, exec) => this.run('write', exec, (confinement) => writeFileTool(confinement, args, config.maxFileBytes, this.accessFor(exec.agent), exec.signal)),
    })
    const replacement = {
      old_string: { type: 'string', description: 'The exact text to replace (white space included); it must occur once unless replace_all.' },
      new_string: { type: 'string', description: 'The text to put in its place.' },
      replace_all: { type: 'boolean', description: 'Replace every occurrence.' },
    }
    tools.register<EditArgs>({
      name: 'edit',
      description: 'Replace exact text in a file: old_string must occur exactly once (or set replace_all). Several replacements in one call go in edits, applied in order; if any fails, none is made.',
      parameters: {
        type: 'object',
        properties: {
          path: path(WRITE_PATH),
          ...replacement,
          edits: {
            type: 'array',
            minItems: 1,
            description: 'Several replacements, applied in order, all or none.',
            items: { type: 'object', properties: replacement, required: ['old_string', 'new_string'], additionalProperties: false },
          },
        },
        required: ['path'],
        additionalProperties: false,
      },
      sideEffecting: true,
      execute: (args, exec) => this.run('edit', exec, (confinement) => editFileTool(confinement, args, config.maxFileBytes, this.accessFor(exec.agent), exec.signal)),
    })
    const listing = { maxResults: config.maxResults, maxWalkEntries: config.maxWalkEntries }
    tools.register<GlobArgs>({
      name: 'glob',
      description: `Find files whose path matches a glob (**/*.ts, src/**/test_*.py, *.{js,json}), newest first, at most ${config.maxResults}. .git and node_modules are not searched.`,
      parameters: {
        type: 'object',
        properties: { pattern: { type: 'string', minLength: 1, description: 'The glob, relative to path.' }, path: path('The directory to search (default: the working directory).') },
        required: ['pattern'],
        additionalProperties: false,
      },
      concurrencySafe: true,
      execute: (args, exec) => this.run('glob', exec, (confinement) => globFiles(confinement, args, listing, exec.signal)),
    })
    tools.register<GrepArgs>({
      name: 'grep',
      description:
        'Search file contents for a regular expression, in path order. output_mode: files_with_matches (default, the file names), content (path:line:text, with -A/-B/-C context lines), count. Filter files with glob (*.ts) or type (ts, py, …). .git and node_modules are not searched; output is bounded.',
      parameters: {
        type: 'object',
        properties: {
          pattern: { type: 'string', minLength: 1, description: 'The regular expression.' },
          path: path('A directory or file to search (default: the working directory).'),
          glob: { type: 'string', minLength: 1, description: 'Only files matching this glob (a name glob such as *.ts, or a path glob with /).' },
          type: { type: 'string', minLength: 1, description: 'Only files of this type (js, ts, py, rust, go, …).' },
          output_mode: { type: 'string', enum: [...GREP_MODES] },
          '-i': { type: 'boolean', description: 'Ignore case.' },
          '-A': { type: 'integer', minimum: 0, maximum: 100, description: 'Lines after each match (content mode).' },
          '-B': { type: 'integer', minimum: 0, maximum: 100, description: 'Lines before each match (content mode).' },
          '-C': { type: 'integer', minimum: 0, maximum: 100, description: 'Lines before and after each match (content mode).' },
        },
        required: ['pattern'],
        additionalProperties: false,
      },
      concurrencySafe: true,
      execute: (args, exec) =>
        this.run('grep', exec, (confinement) =>
          grepTool(confinement, args, { maxOutputChars: config.maxOutputChars, maxLineChars: config.maxLineChars, maxFileBytes: config.maxFileBytes, maxWalkEntries: config.maxWalkEntries, timeoutMs: config.grepTimeoutMs }, this.engine, exec.signal),
        ),
    })
    tools.register<{ path?: string }>({
      name: 'ls',
      description: `List a directory's entries by name (directories end in /, links in @), at most ${config.maxResults}.`,
      parameters: { type: 'object', properties: { path: path('The directory (default: the working directory).') }, additionalProperties: false },
      concurrencySafe: true,
      execute: (args, exec) => this.run('ls', exec, (confinement) => listDirectory(confinement, args.path, listing)),
    })
  }

  /**
   * Let `router` read and write some agents' files through another access (it returns
   * `undefined` for the rest, which stay local). Paths are confined here first, whatever
   * the access, and `write` and `edit` have met the approval broker before any access is
   * asked. An effect of the calling context: gone with it.
   */
  addRouter(router: FileAccessRouter): () => void {
    return this.ctx.effect(() => {
      this.routers = [...this.routers, router]
      return () => {
        this.routers = this.routers.filter((entry) => entry !== router)
      }
    }, 'files.addRouter()')
  }

  /** The access `agent`'s `read`, `write` and `edit` use: a router's choice, else the local file system. */
  private accessFor(agent: ToolAgent): FileAccess {
    for (let index = this.routers.length - 1; index >= 0; index--) {
      const access = this.routers[index]!(agent)
      if (access !== undefined) return access
    }
    return LOCAL_FILE_ACCESS
  }

  /** Which search `grep` uses in this process (ripgrep or the built-in one). */
  get grepEngine(): GrepEngine {
    return this.engine
  }

  /**
   * The calling agent's confinement, resolved once per agent: its header (cwd, sandbox) does
   * not change over its life, and each real-path look-up is a thread-pool round trip.
   */
  private readonly confinements = new WeakMap<object, Confinement>()

  /** One call: the calling agent's confinement, then the tool; a refusal is an error result naming what and why. */
  private async run(tool: string, exec: ToolExecution, body: (confinement: Confinement) => Promise<string>): Promise<ToolOutput> {
    try {
      let confinement = this.confinements.get(exec.agent)
      if (confinement === undefined || confinement.cwd !== exec.agent.session.header.cwd) {
        confinement = await confinementOf(exec.agent, this.options.allowedDirectories)
        this.confinements.set(exec.agent, confinement)
      }
      return await body(confinement)
    } catch (error) {
      return refusal(tool, error)
    }
  }
}

export { FileToolError }
export default FilesToolPlugin
