/**
 * A dsh agent behind the Agent Client Protocol, on the official SDK's agent app.
 *
 * Each ACP session is one dsh agent with its own ordinary session (origin `acp`, the
 * client's cwd), created through `ctx.agents`, so whatever persistence the runtime
 * loaded keeps it like any other. A prompt runs until the agent is quiet (its turn and
 * the turns its background work starts, `runUntilQuiet`); while it runs, the session's
 * live updates stream to the client; `session/cancel` cancels the turn and kills the
 * session's background tasks, and the prompt answers `cancelled`. When the connection
 * closes (the client closed our stdin), every agent is disposed, which flushes its
 * session, before `done` resolves.
 *
 * What an editor can trust (see the README): side-effecting tools run only as the
 * permission policy says (`permission.ts`), frames over the limit are answered and dropped
 * without closing the connection (`frames.ts`), and a connection holds a bounded set of
 * live sessions, each closable with `session/close` (`served-sessions.ts`).
 */
import { stat } from 'node:fs/promises'
import { createRequire } from 'node:module'
import { isAbsolute } from 'node:path'
import type { Readable, Writable } from 'node:stream'
import { agent as agentApp, methods, PROTOCOL_VERSION, RequestError, type AgentContext, type ClientCapabilities, type LoadSessionRequest, type LoadSessionResponse, type PromptRequest, type PromptResponse, type SessionUpdate as AcpSessionUpdate, type Stream } from '@agentclientprotocol/sdk'
import type { Context } from 'cordis'
import { DshError, errorMessage } from '@dsh/base'
import type { Agent } from '@dsh/agent'
import { parsePermissionPolicy } from '@dsh/approvals'
import type { UserMessage } from '@dsh/llm'
import { DEFAULT_MAX_FRAME_BYTES, frameStream } from './frames.js'
import { installPermission, type PermissionPolicy } from './permission.js'
import { DEFAULT_MAX_LIVE_SESSIONS, ServedSessions, type ServedSession } from './served-sessions.js'
import { promptMessage } from './prompt.js'
import { checkLoadable, loadFailure, openStored } from './load.js'
import { acpReplayOf } from './replay.js'
import { acpStopReasonOf, acpUpdateOf } from './updates.js'
import { forwardChildProgress } from './child-progress.js'
import { forwardDescendants } from './descendants.js'
import { clientTerminalRouter } from './client-terminal.js'
import { clientFileRouter } from './client-files.js'
import { readSessionServers, startSessionServers } from './session-mcp.js'
import type { ScopedServers } from '@dsh/mcp'
// ctx.files (its type only): the file tools' router, when they are composed.
import type {} from '@dsh/tool-files'
import { ACP_LINEAGE, admitDelegation, DEFAULT_MAX_DEPTH, openDelegation, RecordingRefused, runDelegation, tighterBound, type AdmittedDelegation, type ReceivedLineage } from '@dsh/subagent'

export interface AcpServer {
  /** Resolves once the connection has closed and every agent it created is disposed. */
  readonly done: Promise<void>
  /** Close the connection (as if the client went away) and wait for `done`. */
  close(): Promise<void>
  /** Why the connection ended, once it has (`end of input` when the client closed it). */
  readonly ended?: Promise<string>
}

/**
 * This package's version, read from its package.json the first time a server that was given
 * no `agentVersion` answers `initialize`: not at import, where finding the package costs a
 * `dsh acp` child about 2 ms of its start (its host passes its own version instead).
 */
let packageVersion: string | undefined
function ownVersion(): string {
  packageVersion ??= (createRequire(import.meta.url)('../package.json') as { version: string }).version
  return packageVersion
}

/** A server set up wrongly by its host (not by a client: client mistakes are JSON-RPC errors). */
export type AcpServerErrorCode = 'INVALID_OPTION'
export class AcpServerError extends DshError<AcpServerErrorCode> {}

export interface AcpServerOptions {
  /**
   * The deepest delegation this server accepts: a `session/new` whose `_meta.dsh`
   * lineage puts the session deeper is refused. Default `DEFAULT_MAX_DEPTH`.
   */
  maxDepth?: number
  /**
   * Who decides whether a side-effecting tool (bash, or any tool marked `sideEffecting`)
   * may run: `ask` the session's client with `session/request_permission` (default), or
   * `allow` / `reject` every call without asking.
   */
  permission?: PermissionPolicy
  /** Live sessions kept before idle ones are parked (see `ServedSessions`). Default `DEFAULT_MAX_LIVE_SESSIONS`. */
  maxLiveSessions?: number
  /**
   * The only directory a `_meta.dsh.recording` link may record into or replay from: the
   * one the process that started this server granted (`DSH_RECORDING_DIR`, set by the
   * `acp` provider of a recording parent). Without it every link is refused: a client
   * cannot make the server write files by asking.
   */
  recordingDir?: string
  /**
   * The version `initialize` reports in `agentInfo`: a host names its own (`dsh acp` the
   * CLI's, of the same release). Default: this package's.
   */
  agentVersion?: string
}

export interface AcpStdioOptions extends AcpServerOptions {
  /** The longest line read from `input`; longer ones are answered and dropped. Default `DEFAULT_MAX_FRAME_BYTES`. */
  maxFrameBytes?: number
  /** Where one-line notes on dropped frames go (`dsh acp`: stderr). Default: the logger. */
  report?: (line: string) => void
}

/**
 * Serve ACP as NDJSON over a pair of Node streams: stdin and stdout for `dsh acp`. Nothing
 * else may write to `output`.
 */
export function serveAcpOverStdio(ctx: Context, options: AcpStdioOptions = {}, input: Readable = process.stdin, output: Writable = process.stdout): AcpServer {
  const maxFrameBytes = options.maxFrameBytes ?? DEFAULT_MAX_FRAME_BYTES
  if (!Number.isSafeInteger(maxFrameBytes) || maxFrameBytes < 1) throw new AcpServerError('INVALID_OPTION', `maxFrameBytes must be a whole number of at least 1 (got ${String(maxFrameBytes)})`)
  const log = ctx.logger('acp-server')
  const stream = frameStream(input, output, { maxFrameBytes, report: options.report ?? ((line) => log.warn(line)) })
  return { ...serveAcp(ctx, stream, options), ended: stream.ended }
}

/** Serve ACP on `stream` with the agents of `ctx` (it needs `ctx.agents`). */
export function serveAcp(ctx: Context, stream: Stream, options: AcpServerOptions = {}): AcpServer {
  const log = ctx.logger('acp-server')
  const maxDepth = options.maxDepth ?? DEFAULT_MAX_DEPTH
  if (!Number.isInteger(maxDepth) || maxDepth < 0) throw new AcpServerError('INVALID_OPTION', `maxDepth must be a whole number of at least 0 (got ${String(maxDepth)})`)
  const read = parsePermissionPolicy(options.permission ?? 'ask', false)
  if (!read.ok) throw new AcpServerError('INVALID_OPTION', `permission ${read.problem}`)
  const policy = read.value
  if (!ctx.get('approvals')) throw new AcpServerError('INVALID_OPTION', 'serving ACP needs the approval broker (@dsh/approvals, ctx.approvals): nobody could decide side effects without it')
  const maxLive = options.maxLiveSessions ?? DEFAULT_MAX_LIVE_SESSIONS
  if (!Number.isSafeInteger(maxLive) || maxLive < 1) throw new AcpServerError('INVALID_OPTION', `maxLiveSessions must be a whole number of at least 1 (got ${String(maxLive)})`)
  const sessions = new ServedSessions(ctx, maxLive, (format, ...args) => log.warn(format, ...args))

  /** What the client offered at `initialize` (a terminal makes its sessions' commands run there). */
  let clientCapabilities: ClientCapabilities | undefined

  const app = agentApp({ name: 'dsh' })
    .onRequest(methods.agent.initialize, ({ params }) => {
      clientCapabilities = params.clientCapabilities
      return {
        protocolVersion: PROTOCOL_VERSION,
        agentCapabilities: {
          // Reopening needs stored sessions: without a storage there is nothing to load.
          loadSession: ctx.sessions.storageName !== undefined,
          promptCapabilities: { image: false, audio: false, embeddedContext: true },
          // Streamable HTTP and stdio servers, through @dsh/mcp (session-mcp.ts).
          mcpCapabilities: { http: true, sse: false },
          sessionCapabilities: { close: {} },
        },
        agentInfo: { name: 'dsh', title: 'dsh', version: options.agentVersion ?? ownVersion() },
        authMethods: [],
      }
    })
    .onRequest(methods.agent.session.new, async ({ params }) => {
      const { cwd } = params
      if (!isAbsolute(cwd)) throw RequestError.invalidParams({ cwd }, 'cwd must be an absolute path')
      await checkCwd(cwd)
      const servers = await readSessionServers(params.mcpServers, cwd, 'session/new')
      const lineage = readLineage(params._meta, 'session/new')
      // The one served line (`@dsh/subagent`'s served.ts): refused before anything exists
      // when too deep; the tighter of this server's bound and the one the delegating parent
      // inherited is recorded in the header, so the session's own delegations stay within
      // it; its recording link adopted (it records or replays its own model calls as its
      // parent does: recording and replay reach across processes); bounded by the budget its
      // parent handed it from the first model call.
      const admitted = admitSession(lineage)
      // The servers start while the agent is made: the model's tool list is complete before the answer.
      const mcp = startSessionServers(servers, warnMcp)
      const agent = await openDelegation(ctx, admitted, { meta: { origin: 'acp', cwd }, ...(options.recordingDir !== undefined && { recordingDir: options.recordingDir }) }).catch(async (error: unknown) => {
        await (await mcp)?.stop()
        if (!(error instanceof RecordingRefused)) throw error
        const { recording } = lineage
        throw error.grant ? RequestError.invalidParams({ _meta: 'dsh.recording' }, error.message) : RequestError.invalidRequest({ recording }, error.message)
      })
      await serve(agent, await mcp)
      return { sessionId: agent.id }
    })
    .onRequest(methods.agent.session.load, ({ params, client }) => load(params, client))
    .onRequest(methods.agent.session.prompt, ({ params, client, signal }) => prompt(params, client, signal))
    .onNotification(methods.agent.session.cancel, ({ params }) => {
      // Stop means stop: the turn, and the background work the prompt started, go.
      sessions.get(params.sessionId)?.prompt?.abort(new Error('cancelled by the ACP client'))
    })
    .onRequest(methods.agent.session.close, async ({ params }) => {
      // Its prompt is cancelled and its agent disposed: file closed, lock released, tasks killed.
      if (!(await sessions.close(params.sessionId))) throw RequestError.sessionNotFound(params.sessionId)
      return {}
    })

  /**
   * The lineage a dsh parent sent in `_meta.dsh`: malformed fields are dropped with a
   * warning, a malformed recording link refuses the request.
   */
  function readLineage(meta: unknown, method: string): ReceivedLineage {
    try {
      return ACP_LINEAGE.read(meta, log, method)
    } catch (error) {
      throw RequestError.invalidParams({ _meta: 'dsh' }, errorMessage(error))
    }
  }

  /** A session with `lineage` admitted, or the JSON-RPC refusal of one too deep. */
  function admitSession(lineage: ReceivedLineage): AdmittedDelegation {
    try {
      return admitDelegation({ maxDepth, subject: 'this session would be', own: "this server's" }, lineage)
    } catch (error) {
      throw RequestError.invalidRequest({ delegationDepth: lineage.delegationDepth, maxDepth: tighterBound(maxDepth, lineage.maxDepth) }, errorMessage(error))
    }
  }

  /** Take a new or reopened agent (and the MCP servers its client sent, their tools its own) into this connection, unless the client has already left. */
  async function serve(agent: Agent, mcp?: ScopedServers): Promise<void> {
    if (connection.signal.aborted) {
      // The client left while the agent was being created: nobody will ever dispose it.
      await agent.dispose()
      await mcp?.stop()
      throw RequestError.internalError(undefined, 'the connection closed')
    }
    mcp?.register(agent.ctx)
    sessions.add(agent, mcp)
  }

  /** A session's server that did not start, or a tool of it skipped: the session goes on without it. */
  function warnMcp(line: string): void {
    log.warn(line)
  }

  /** Sessions being reopened right now: a second load of one of them is refused, not raced. */
  const loading = new Set<string>()

  async function load(params: LoadSessionRequest, client: AgentContext): Promise<LoadSessionResponse> {
    const { sessionId, cwd } = params
    if (!isAbsolute(cwd)) throw RequestError.invalidParams({ cwd }, 'cwd must be an absolute path')
    if (sessions.has(sessionId) || loading.has(sessionId)) {
      throw RequestError.invalidRequest({ sessionId }, `session ${sessionId} is already open on this connection; prompt it, or open another connection to load it again`)
    }
    loading.add(sessionId)
    let agent: Agent
    try {
      await checkCwd(cwd)
      await checkLoadable(ctx, params, { lineage: readLineage(params._meta, 'session/load'), maxDepth })
      const mcp = startSessionServers(await readSessionServers(params.mcpServers, cwd, 'session/load'), warnMcp)
      agent = await openStored(ctx, sessionId).catch(async (error: unknown) => {
        await (await mcp)?.stop()
        throw error
      })
      await serve(agent, await mcp)
    } finally {
      loading.delete(sessionId)
    }
    // The whole conversation, in order, before the answer (ACP's rule for session/load).
    // A client that leaves meanwhile ends the replay; the connection's end disposes the agent.
    for (const event of agent.session.events()) {
      for (const update of acpReplayOf(event)) await client.notify(methods.client.session.update, { sessionId, update })
    }
    return {}
  }

  async function prompt(params: PromptRequest, client: AgentContext, signal: AbortSignal): Promise<PromptResponse> {
    const served = sessions.get(params.sessionId)
    if (!served) throw RequestError.sessionNotFound(params.sessionId)
    if (served.prompt) throw RequestError.invalidRequest({ sessionId: params.sessionId }, 'a prompt is already running in this session; wait for its answer or send session/cancel')
    const message = promptMessage(params.prompt)
    const cancel = new AbortController()
    served.prompt = cancel
    const running = runPrompt(served, message, cancel, params, client, signal)
    served.running = running
    try {
      return await running
    } finally {
      served.prompt = undefined
      served.running = undefined
      sessions.parkIdle()
    }
  }

  async function runPrompt(served: ServedSession, message: UserMessage, cancel: AbortController, params: PromptRequest, client: AgentContext, signal: AbortSignal): Promise<PromptResponse> {
    // A parked session is reopened from its file first.
    const agent = await sessions.agentOf(served).catch((error: unknown) => {
      throw loadFailure(served.id, error)
    })
    const send = (acpUpdate: AcpSessionUpdate) => {
      // Sent in order through the connection's write queue, always ahead of the response.
      client.notify(methods.client.session.update, { sessionId: params.sessionId, update: acpUpdate }).catch(() => {
        // The connection closed; the prompt is being cancelled through `signal`.
      })
    }
    // The children this session's tool calls start show their work on those calls.
    const children = forwardChildProgress(ctx, agent.id, send)
    // Every descendant's start and end, on the call its branch hangs under: a dsh parent's hooks hear them.
    const answered = new Set<string>()
    const stopDescendants = forwardDescendants(ctx, agent.id, send, (callId) => answered.has(callId))
    const unsubscribe = agent.session.subscribe((update) => {
      // A call's result is its final update: its child's progress stops before it goes out.
      if (update.type === 'tool/result') {
        children.closeCall(update.result.callId)
        answered.add(update.result.callId)
      }
      const acpUpdate = acpUpdateOf(update)
      if (acpUpdate) send(acpUpdate)
    })
    // `$/cancel_request` for this prompt, or the connection closing, aborts `signal`.
    const onAbort = () => cancel.abort(new Error('the ACP prompt request was cancelled'))
    if (signal.aborted) onAbort()
    else signal.addEventListener('abort', onAbort, { once: true })
    try {
      // Turns that notices of its owned work start (background tasks, continuable
      // children) belong to this prompt too: they are streamed like the first, a cancel
      // reaches them, and the answer waits until the agent is quiet.
      // The response's `_meta.dsh.usage` is what this prompt's whole subtree used (every turn
      // it runs, and every child run it started, at any depth): a dsh parent counts it
      // against the budget it handed this session.
      const run = await runDelegation(ctx, agent, message, { signal: cancel.signal })
      // A stop ACP has no word for (a budget) says so in `_meta.dsh`, for a dsh parent.
      const ending = run.last.reason === 'budget' ? { stopReason: run.last.reason, ...(run.last.error !== undefined && { diagnostic: run.last.error }) } : {}
      return { stopReason: acpStopReasonOf(run.last, run.cancelled), _meta: { dsh: { usage: run.usage, ...ending } } }
    } finally {
      signal.removeEventListener('abort', onAbort)
      unsubscribe()
      children.dispose()
      stopDescendants()
    }
  }

  async function checkCwd(cwd: string): Promise<void> {
    const info = await stat(cwd).catch(() => undefined)
    if (!info?.isDirectory()) throw RequestError.invalidParams({ cwd }, `cwd ${cwd} is not a directory`)
  }

  const connection = app.connect(stream)
  // What the broker's rules do not decide for this connection's sessions (and their
  // in-process children) goes to the client, or to the fixed policy; gone with the connection.
  const removeGate = installPermission(ctx, policy, {
    sessionOf: (agentId) => sessions.sessionOf(agentId),
    delegated: (sessionId) => delegatedHere(ctx.agents.get(sessionId)),
    client: connection.client,
  })
  // A client that offers a terminal runs its sessions' commands (`client-terminal.ts`).
  const terminals = clientTerminalRouter({
    client: connection.client,
    capabilities: () => clientCapabilities,
    sessionOf: (agentId) => sessions.sessionOf(agentId),
    cwdOf: (sessionId) => ctx.agents.get(sessionId)?.session.header.cwd,
  })
  const removeRouter = ctx.get('bash')?.addRouter(terminals.route)
  // A client that offers fs reads and writes its sessions' files for the file tools (`client-files.ts`).
  const removeFileRouter = ctx.get('files')?.addRouter(
    clientFileRouter({
      client: connection.client,
      capabilities: () => clientCapabilities,
      sessionOf: (agentId) => sessions.sessionOf(agentId),
      cwdOf: (agentId) => ctx.agents.get(agentId)?.session.header.cwd,
    }),
  )
  const done = connection.closed.then(async () => {
    await sessions.closeAll()
    await terminals.stopAll()
    removeRouter?.()
    removeFileRouter?.()
    removeGate()
  })
  return {
    done,
    close: () => {
      connection.close()
      return done
    },
  }
}

/**
 * Whether `agent`'s session was opened for a parent in another process: its header keeps
 * the lineage its `session/new` (or the stored session `session/load` reopened) carried.
 * Unknown (not live) counts as delegated: the stricter answer.
 */
function delegatedHere(agent: Agent | undefined): boolean {
  if (agent === undefined) return true
  const { header } = agent.session
  return header.parentSession !== undefined || (header.delegationDepth ?? 0) > 0
}
