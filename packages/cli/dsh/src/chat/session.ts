/**
 * `dsh chat` (and `dsh` with no command on a terminal): one dsh session, a turn per prompt.
 * Each turn is shown as `dsh run` shows a run on a terminal (the same view: the root's
 * text as it streams, its tool calls, the live tree of its children) and asks approvals
 * the same way (the terminal permission prompt); between turns the prompt line reads the
 * next one. The session is an ordinary stored session: `dsh --resume`, `dsh run --resume`
 * and `dsh sessions` reach it like any other.
 *
 * Without a terminal (standard input or output is a pipe or a file) the session reads its
 * prompts from standard input, one a line (`piped.ts`), and runs each as `dsh run --stream`
 * would in a pipe: the root's text written to stdout as it arrives, progress lines on
 * stderr, approvals by the non-interactive policy (`reject` unless `--permission allow`;
 * nobody can be asked). Slash commands answer on stdout; the session's own lines (its id,
 * how to resume it) go to stderr, so stdout is the conversation. A signal cancels the
 * running turn and ends the session; the exit code says whether every turn completed.
 */
import { join } from 'node:path'
import type { Agent } from '@dsh/agent'
import { errorMessage } from '@dsh/base'
import { runUntilQuiet } from '@dsh/tasks'
import type { Composition } from '../compose.js'
import { dshHome } from '../config-file.js'
import { oneLineMessage, UsageError } from '../errors.js'
import { EXIT_FAILURE, exitCodeOfSignal } from '../exit.js'
import { installRunPermission, type RunPermission } from '../permission-prompt.js'
import { colorWanted, palette as paletteOf, type Palette } from '../progress/colors.js'
import { watch, type RunView } from '../progress/run-view.js'
import { chooseModel, NO_MODEL_HELP, replayProblems, resumeTarget } from '../run.js'
import { startRuntime, type RuntimeOptions } from '../runtime.js'
import { stopStartedGroups } from '../stop-groups.js'
import { PromptHistory } from './history.js'
import { LineEditor, type PromptRead } from './line-editor.js'
import { PipedPrompts } from './piped.js'
import { newestFirst, parseSlash, type ChatHost } from './slash.js'

export interface ChatOptions extends RuntimeOptions {
  /** Go on in this stored session (an id or a unique tail); `''`: the newest root session. */
  resume?: string
  /** Who decides side effects no rule decided; default `ask` on a terminal, `reject` from a pipe. */
  permission?: RunPermission
  /** `false`: no colour (`--no-color`; a non-empty NO_COLOR says the same). */
  color?: boolean
}

/** Where a session's prompts come from: the terminal's prompt line, or standard input read line by line. */
type PromptSource = Pick<LineEditor, 'read' | 'duringTurn' | 'standAside' | 'end' | 'close'> & {
  /** Prompts typed at the terminal are remembered for Up and Down; piped ones are not. */
  readonly history?: PromptHistory
}

export async function chatCommand(options: ChatOptions): Promise<number> {
  const terminal = process.stdin.isTTY === true && process.stdout.isTTY === true
  if (!terminal && options.permission === 'ask') {
    throw new UsageError('USAGE', 'dsh chat: --permission ask needs a terminal (standard input and output); without one the prompts come from standard input and nobody can be asked: use --permission allow or reject')
  }
  const model = chooseModel(options.model)
  const runtime = await startRuntime({ ...options, model, checkReady: true })
  const palette = paletteOf(colorWanted({ tty: process.stdout.isTTY === true, noColorFlag: options.color === false }))
  let chat: Chat | undefined
  const prompts: PromptSource = terminal
    ? new LineEditor({ input: process.stdin, output: process.stdout, history: new PromptHistory(join(dshHome(), 'chat-history.jsonl')), palette })
    : new PipedPrompts({ input: process.stdin, refused: (line) => chat!.fail(line) })
  chat = new Chat(runtime, prompts, palette, options, terminal)
  try {
    await chat.open(options.resume)
    return await chat.loop()
  } finally {
    prompts.close()
    await chat.close()
    await runtime.dispose()
  }
}

class Chat implements ChatHost {
  private agent: Agent | undefined
  private spec: string | undefined
  /** The view of the turn running now. */
  private view: RunView | undefined
  /** What a SIGINT or SIGTERM does now: cancel the running turn, or end the prompt. */
  private onSignal: ((signal: NodeJS.Signals) => void) | undefined
  /** The signal the session is leaving on. */
  private leavingOn: NodeJS.Signals | undefined
  /** From a pipe: a turn, a prompt or a command failed, so the exit code is not 0. */
  private failed = false
  private readonly cleanups: Array<() => void> = []

  constructor(
    readonly runtime: Composition,
    private readonly prompts: PromptSource,
    private readonly palette: Palette,
    private readonly options: ChatOptions,
    /** Prompts are typed at a terminal; otherwise they are read from a pipe. */
    private readonly terminal: boolean,
  ) {
    this.spec = chooseModel(options.model) ?? runtime.ctx.llm.config.model
    // Ctrl-C on the terminal is a key (raw mode); a signal comes from the permission prompt
    // (which passes a Ctrl-C on as one) or from outside, and means the same as the key.
    // From a pipe there is no key: SIGINT, like SIGTERM, ends the turn and the session, as
    // it ends dsh run, and nothing more is read.
    const onSignal = (signal: NodeJS.Signals) => {
      if (signal === 'SIGTERM' || !this.terminal) {
        this.leavingOn ??= signal
        this.prompts.end()
      }
      this.onSignal?.(signal)
    }
    process.on('SIGINT', onSignal)
    process.on('SIGTERM', onSignal)
    this.cleanups.push(() => {
      process.off('SIGINT', onSignal)
      process.off('SIGTERM', onSignal)
    })
  }

  get sessionId(): string {
    return this.agent!.id
  }

  get model(): string | undefined {
    return this.spec
  }

  say(line: string): void {
    process.stdout.write(`${line}\n`)
  }

  /** Something the user asked for failed: said on the terminal, or on stderr from a pipe (the exit code then 1). */
  fail(line: string, kind: 'warning' | 'error' = 'warning'): void {
    if (this.terminal) return this.say(this.palette.paint(kind, line))
    this.failed = true
    process.stderr.write(`${line}\n`)
  }

  /** The session's own lines (its id, how to resume it): stdout on a terminal; stderr from a pipe, whose stdout is the conversation. */
  private aside(line: string): void {
    if (this.terminal) process.stdout.write(`${this.palette.paint('dim', line)}\n`)
    else process.stderr.write(`${line}\n`)
  }

  async open(resume: string | undefined): Promise<void> {
    let id: string | undefined
    if (resume !== undefined) {
      const wanted = resume === '' ? await this.newestSession() : resume
      const target = await resumeTarget(this.runtime, wanted, this.options.model)
      id = target.id
      if (target.model !== undefined) this.spec = target.model
    }
    if (!this.spec) throw new UsageError('NO_MODEL', NO_MODEL_HELP)
    await this.start(id, this.spec)
    const policy = this.options.permission ?? (this.terminal ? 'ask' : 'reject')
    this.cleanups.push(
      installRunPermission(this.runtime.ctx, {
        policy,
        ...(policy === 'ask' && { terminal: { input: process.stdin, output: process.stdout, standAside: () => this.standAside() } }),
        warn: (line) => (this.view ? this.view.notice(line) : process.stderr.write(`${line}\n`)),
      }),
    )
    const turns = this.agent!.session.events().filter((event) => event.type === 'turn/start').length
    const opening = id !== undefined ? `resumed session ${id} (${turns} earlier ${turns === 1 ? 'turn' : 'turns'})` : `session ${this.sessionId}`
    this.aside(`dsh · ${opening} · ${this.spec} · ${this.terminal ? '/help for commands, Ctrl-D to leave' : 'prompts from standard input, one a line'}`)
  }

  /**
   * Prompts until the user leaves (or the input ends); every turn's failure is reported and
   * the session goes on. From a pipe the exit code is 1 when anything failed on the way.
   */
  async loop(): Promise<number> {
    let interrupted = false
    for (;;) {
      const read: PromptRead = await this.prompts.read()
      if (read.kind === 'end' || this.leavingOn) return this.exitCode()
      if (read.kind === 'interrupt') {
        if (interrupted) return 0
        interrupted = true
        this.say(this.palette.paint('dim', '(Ctrl-C again, Ctrl-D or /exit to leave)'))
        continue
      }
      interrupted = false
      if (read.kind === 'cleared') continue
      this.prompts.history?.add(read.text)
      if (read.text.startsWith('/')) {
        if ((await this.slash(read.text)) === 'exit') return this.exitCode()
        continue
      }
      await this.turn(read.text)
      if (this.leavingOn) return this.exitCode()
    }
  }

  async switchTo(sessionId: string | undefined, model?: string): Promise<void> {
    const spec = model ?? this.spec!
    const previous = this.agent
    this.agent = undefined
    await previous?.dispose()
    try {
      await this.start(sessionId, spec)
    } catch (error) {
      // The session it came from is stored whole: go back to it rather than be left without one.
      if (previous) await this.start(previous.id, this.spec!)
      throw error
    }
    this.spec = spec
  }

  async checkModel(spec: string): Promise<void> {
    try {
      const resolved = this.runtime.ctx.llm.resolve(spec)
      await resolved.adapter.prepare?.(resolved.model)
    } catch (error) {
      throw new UsageError('NO_MODEL', `dsh: model ${spec} cannot be used: ${oneLineMessage(error)}`)
    }
  }

  async resolveSession(wanted: string): Promise<string> {
    return (await resumeTarget(this.runtime, wanted, this.spec)).id
  }

  async close(): Promise<void> {
    for (const cleanup of this.cleanups.splice(0)) cleanup()
    await this.agent?.dispose().catch((error: unknown) => process.stderr.write(`dsh: disposing the agent failed: ${errorMessage(error)}\n`))
    if (this.agent) this.aside(`session ${this.agent.id} is stored; dsh --resume ${this.agent.id} goes on with it`)
  }

  /**
   * 128 + the signal's number when one ended the session; on a terminal 0 otherwise; from
   * a pipe 1 when a turn, a prompt or a command failed, or a replayed model
   * (`--model replay:DIR`) was asked what its recording does not hold or left some unused.
   */
  private exitCode(): number {
    if (this.leavingOn) return exitCodeOfSignal(this.leavingOn)
    if (this.terminal) return 0
    for (const problem of replayProblems(this.runtime)) this.fail(`dsh: ${problem}`)
    return this.failed ? EXIT_FAILURE : 0
  }

  private async start(sessionId: string | undefined, spec: string): Promise<void> {
    this.agent = await this.runtime.ctx.agents.create({ sessionId, meta: { origin: 'cli', cwd: process.cwd() }, agentOptions: { model: spec } })
  }

  private async newestSession(): Promise<string> {
    const roots = (await this.runtime.ctx.sessions.listStored()).filter((header) => header.parentSession === undefined).sort(newestFirst)
    if (roots.length === 0) throw new UsageError('SESSION', 'dsh: --resume without an id goes on with the newest session, and there is none stored yet')
    return roots[0]!.id
  }

  /** The permission prompt reads the terminal: the live rows and the key router stand aside. */
  private standAside(): () => void {
    const keys = this.prompts.standAside()
    const view = this.view?.standAside()
    return () => {
      keys()
      view?.()
    }
  }

  private async slash(line: string): Promise<'exit' | void> {
    const parsed = parseSlash(line)
    if ('problem' in parsed) return this.fail(parsed.problem)
    try {
      return await parsed.command.run(this, parsed.argument)
    } catch (error) {
      this.fail(error instanceof UsageError ? error.message : `dsh: /${parsed.command.name} failed: ${oneLineMessage(error)}`, 'error')
    }
  }

  /**
   * One prompt run until the agent is quiet; Ctrl-C cancels it, a second one leaves at once.
   * From a pipe the root's text streams to stdout (`dsh run --stream`'s view), or to the
   * live view when stdout is a terminal.
   */
  private async turn(prompt: string): Promise<void> {
    const agent = this.agent!
    const cancel = new AbortController()
    const view = watch(this.runtime, agent, { ...(this.terminal ? { tty: true } : { stream: true }), ...(this.options.color === false && { color: false }) })
    this.view = view
    const interrupt = (signal: NodeJS.Signals = 'SIGINT') => {
      if (!cancel.signal.aborted) {
        view.notice(`dsh: cancelling the turn (${signal === 'SIGINT' ? 'Ctrl-C' : signal} again leaves dsh at once)`)
        return cancel.abort(new Error(`interrupted by ${signal}`))
      }
      // As in dsh run: every process group started here is asked to go first.
      void stopStartedGroups().finally(() => process.exit(exitCodeOfSignal(signal)))
    }
    const keys = this.prompts.duringTurn(() => interrupt())
    this.onSignal = interrupt
    try {
      const run = await runUntilQuiet(agent, prompt, { tasks: this.runtime.ctx.get('tasks'), signal: cancel.signal })
      view.finish(run)
      if (run.cancelled || run.last.reason !== 'completed') this.failed = true
      if (run.cancelled) view.problem(`dsh: the turn was cancelled${this.leavingOn ? '' : '; the session goes on'}`)
      else if (run.last.reason !== 'completed') view.problem(`dsh: the turn ended ${run.last.reason}${run.last.error ? `: ${run.last.error}` : ''}`)
    } catch (error) {
      view.close()
      this.failed = true
      process.stderr.write(`${this.palette.paint('error', `dsh: the turn failed: ${oneLineMessage(error)}`)}\n`)
    } finally {
      view.close()
      keys()
      this.view = undefined
      this.onSignal = undefined
    }
  }
}
