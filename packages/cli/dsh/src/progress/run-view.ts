/**
 * How `dsh run` (and the demo) shows a run: NDJSON with `--json`, a live terminal view on
 * a terminal, else plain progress lines on stderr and the answer on stdout. The answer is
 * chosen by the shared output-selection rule over the whole run (`runUntilQuiet`'s
 * `output`), in every mode: text a step streamed before its tool calls is not the answer.
 */
import type { Agent } from '@dsh/agent'
import { outputText, type AssistantMessage } from '@dsh/llm'
import type { SessionUpdate } from '@dsh/session'
import { summariseArgs } from '@dsh/subagent'
import type { QuietRun } from '@dsh/tasks'
import type { Composition } from '../compose.js'
import type { RunOptions } from '../run.js'
import { colorWanted, palette as paletteOf, type Palette } from './colors.js'
import { lifecycleLine } from './render.js'
import { LiveTerminal } from './terminal.js'
import { ProgressTracker, toolActivity } from './tracker.js'

/** A run's options; the view reads json, quiet, tty, stream and color. */
type RunViewOptions = Partial<RunOptions>

export interface RunView {
  finish(run: QuietRun): void
  /** A line for the user while the run goes on (on a terminal, written above the live rows). */
  notice(line: string): void
  /** A line saying why the run failed, once it is over (painted as an error on a terminal). */
  problem(line: string): void
  /** The live view, if one is drawn, steps aside for a prompt; the returned function brings it back. */
  standAside(): () => void
  /** Stop drawing and give standard error back, whether or not the run finished (idempotent). */
  close(): void
}

/** NDJSON line writer for `--json`. */
export function jsonLine(record: Record<string, unknown>): void {
  process.stdout.write(`${JSON.stringify(record)}\n`)
}

/**
 * - `--json`: NDJSON of every session event and every subagent start, progress and end, the
 *   root's text and reasoning deltas as they arrive (`text/delta`, `reasoning/delta`), then
 *   one `{"kind":"answer","text":...}` record;
 * - on a terminal: the root's text as it streams, its tool calls, and below them a live tree
 *   of the agent and its children (each child's activity, tokens and elapsed time); the
 *   answer is printed again at the end only if it was not what streamed;
 * - otherwise: on stderr one plain line per subagent start, end and tool call (unless
 *   quiet), and on stdout the answer at the end, or with `stream` the root's text as it
 *   arrives. `--quiet` (without `--json`) listens to no child, so children build no progress.
 */
export function watch(runtime: Composition, agent: Agent, options: RunViewOptions): RunView {
  if (options.json) return jsonView(runtime, agent)
  const tty = options.tty ?? process.stdout.isTTY === true
  if (tty) return terminalView(runtime, agent, options, paletteOf(colorWanted({ tty, noColorFlag: options.color === false })))
  // Disposed by close(): dsh chat watches one agent turn after turn.
  const tracker = options.quiet ? undefined : new ProgressTracker(runtime.ctx, agent)
  tracker?.onChange((change) => {
    const line = lifecycleLine(change, Date.now())
    if (line) process.stderr.write(`${line}\n`)
  })
  const plain: RunView = { finish: (run) => printAnswer(run, ''), notice: writeLine, problem: writeLine, standAside: () => () => {}, close: () => tracker?.dispose() }
  return options.stream ? streamedView(agent, plain) : plain
}

function jsonView(runtime: Composition, agent: Agent): RunView {
  jsonLine({ kind: 'session/header', session: agent.id, header: agent.session.header })
  agent.session.subscribe((update: SessionUpdate) => {
    // A delta is live only, never stored: its own record, so a reader of session events sees the log's.
    if (update.type === 'assistant/chunk') jsonLine({ kind: update.kind === 'text' ? 'text/delta' : 'reasoning/delta', session: agent.id, text: update.text })
    else jsonLine({ kind: 'session/event', session: agent.id, event: update })
  })
  runtime.ctx.on('subagent/start', (info) => jsonLine({ kind: 'subagent/start', ...info }))
  // Written as the service emits it, so a run's progress lines fall between its start and its end.
  runtime.ctx.on('subagent/progress', (info) => jsonLine({ kind: 'subagent/progress', ...info }))
  runtime.ctx.on('subagent/end', (info) => jsonLine({ kind: 'subagent/end', ...info }))
  // A delegation waiting for a slot of its tree's cap, and the tree's budget events.
  runtime.ctx.on('subagent/queued', (info) => jsonLine({ kind: 'subagent/queued', ...info }))
  runtime.ctx.on('subagent/budget', ({ kind: budgetKind, ...event }) => jsonLine({ kind: 'subagent/budget', event: budgetKind, ...event }))
  // A request waiting for an answer, and how it was answered (its arguments as shown, never whole).
  runtime.ctx.on('approval/pending', ({ args: _args, subject: _subject, kind: callKind, ...shown }) => jsonLine({ kind: 'approval/pending', callKind, ...shown }))
  runtime.ctx.on('approval/settled', ({ request, decision }) => jsonLine({ kind: 'approval/settled', id: request.id, path: request.path, tool: request.tool, decision }))
  return { finish: (run) => jsonLine({ kind: 'answer', session: agent.id, text: outputText(run.output) }), notice: writeLine, problem: writeLine, standAside: () => () => {}, close: () => {} }
}

/**
 * `--stream` in a pipe: every piece of the root's text as it arrives, a step's text that
 * went on to call tools ended by a line break so the next starts on a line of its own, the
 * whole ended by one. Nothing streamed (an adapter that sent no text deltas): the answer.
 */
function streamedView(agent: Agent, plain: RunView): RunView {
  let streamed = false
  let atLineStart = true
  const stop = agent.session.subscribe((update: SessionUpdate) => {
    if (update.type === 'assistant/chunk' && update.kind === 'text' && update.text) {
      process.stdout.write(update.text)
      streamed = true
      atLineStart = update.text.endsWith('\n')
    } else if (update.type === 'assistant/message' && hasToolCalls(update.message) && !atLineStart) {
      process.stdout.write('\n')
      atLineStart = true
    }
  })
  return {
    ...plain,
    finish: (run) => {
      stop()
      if (!streamed) return plain.finish(run)
      if (!atLineStart) process.stdout.write('\n')
    },
    close: () => {
      stop()
      plain.close()
    },
  }
}

function terminalView(runtime: Composition, agent: Agent, options: RunViewOptions, palette: Palette): RunView {
  const tracker = options.quiet ? undefined : new ProgressTracker(runtime.ctx, agent)
  // The same terminal when both are one: its lines then go above the live rows.
  const screen = new LiveTerminal({ out: process.stdout, palette, ...(tracker && { tracker }), ...(process.stderr.isTTY && { stderr: process.stderr }) })
  let stepText = ''
  /** The text of the last step whose streamed text was its whole message's: the answer need not be printed again. */
  let shown: string | undefined
  const stop = agent.session.subscribe((update: SessionUpdate) => {
    switch (update.type) {
      case 'step/start':
        stepText = ''
        return
      case 'assistant/chunk':
        if (update.kind !== 'text') return
        stepText += update.text
        screen.text(update.text)
        return
      case 'assistant/message': {
        screen.endText()
        const text = messageText(update.message)
        if (text && text === stepText) shown = text
        return
      }
      case 'tool/call':
        screen.line(`→ ${toolActivity(update.call.name, summariseArgs(update.call.args ?? update.call.rawArgs ?? {}))}`, 'tool')
        return
      default:
        return
    }
  })
  let closed = false
  const close = () => {
    if (closed) return
    closed = true
    stop()
    screen.stop()
    tracker?.dispose()
  }
  return {
    finish: (run) => {
      tracker?.finishRoot(run.last.reason)
      close()
      const answer = outputText(run.output)
      if (answer !== shown) printAnswer(run, '\n')
    },
    notice: (line) => screen.note(line),
    problem: (line) => (closed ? writeLine(process.stderr.isTTY ? palette.paint('error', line) : line) : screen.line(line, 'error')),
    standAside: () => screen.standAside(),
    close,
  }
}

function printAnswer(run: QuietRun, separator: string): void {
  const answer = outputText(run.output)
  if (answer) process.stdout.write(`${separator}${answer}${answer.endsWith('\n') ? '' : '\n'}`)
}

function messageText(message: AssistantMessage): string {
  return message.content.map((block) => (block.type === 'text' ? block.text : '')).join('')
}

function hasToolCalls(message: AssistantMessage): boolean {
  return message.content.some((block) => block.type === 'tool-call')
}

function writeLine(line: string): void {
  process.stderr.write(`${line}\n`)
}
