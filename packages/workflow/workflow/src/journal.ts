/**
 * The workflow run's record, in its root session, written with the session's own events
 * so `dsh sessions show` and `tree` read it as they read any agent's: each run of the
 * workflow (the first and every resume) is one turn whose user message names the file and
 * holds its text; each `agent()` and `bestOf()` call is a tool call (`workflow.agent`,
 * `workflow.bestOf`, its id `wf-<key>-<n>`) whose result's `record.workflow` holds the
 * call's key and outcome; the return value closes the turn as the assistant's answer.
 * A process killed mid-run leaves the turn open: the resume's agent closes it (`@dsh/agent`,
 * each call in flight answered as interrupted) and the calls that finished are read back.
 */
import type { Session } from '@dsh/session'
import type { StopReason } from '@dsh/base'
import type { SubagentUsage } from '@dsh/subagent'

export const AGENT_CALL = 'workflow.agent'
export const BEST_OF_CALL = 'workflow.bestOf'
const RUN_HEADLINE = 'dsh workflow run '

/** One finished call as the root session records it. */
export interface CallRecord {
  kind: 'agent' | 'bestOf'
  key: string
  label: string
  stopReason: StopReason
  text: string
  structured?: unknown
  usage?: SubagentUsage
  sessionId?: string
  /** Side effects its child (or a descendant) had outside a workspace: one line each (`bash: rm -rf build`). */
  sideEffects?: string[]
  /** Taken from an earlier run's record (not counted again when the journal is read). */
  reused?: boolean
  /** `bestOf`'s record: the attempts, the judging and the winner. */
  bestOf?: unknown
}

/** What a resume reads back: the finished calls by key, oldest first, and the file of the last run. */
export interface JournalReading {
  completed: Map<string, CallRecord[]>
  /** Calls that started and never finished (closed as interrupted): their ids. */
  interrupted: number
  file?: string
  source?: string
  runs: number
}

export class Journal {
  private step = 0
  private turn = 0
  constructor(private readonly session: Session) {}

  /** A run of the workflow begins: a turn of the root session. */
  begin(file: string, source: string): void {
    this.turn = this.session.events().filter((event) => event.type === 'turn/start').length + 1
    this.session.append({ type: 'turn/start', turn: this.turn })
    this.session.append({ type: 'step/start', step: (this.step = 1) })
    this.session.append({ type: 'user/message', message: { role: 'user', content: [{ type: 'text', text: `${RUN_HEADLINE}${file}\n\n${source}` }] } })
  }

  started(kind: CallRecord['kind'], callId: string, args: Record<string, unknown>): void {
    this.session.append({ type: 'tool/call', call: { type: 'tool-call', id: callId, name: kind === 'agent' ? AGENT_CALL : BEST_OF_CALL, args } })
  }

  ended(callId: string, record: CallRecord, error?: string): void {
    const name = record.kind === 'agent' ? AGENT_CALL : BEST_OF_CALL
    const text = error ?? (record.text !== '' ? record.text : record.structured !== undefined ? JSON.stringify(record.structured) : `(${record.stopReason})`)
    this.session.append({ type: 'tool/result', result: { type: 'tool-result', callId, name, content: [{ type: 'text', text }], isError: error !== undefined }, record: { workflow: record } })
  }

  /** The run ends: its answer (the return value, or why it stopped) and the turn's end. */
  finish(answer: string, reason: StopReason, error?: string): void {
    this.session.append({ type: 'assistant/message', message: { role: 'assistant', content: [{ type: 'text', text: answer }] } })
    this.session.append({ type: 'step/end', step: this.step })
    this.session.append({ type: 'turn/end', turn: this.turn, reason, ...(error !== undefined && { error }) })
  }
}

/** Read a root session back: is it a workflow run's, and which calls finished. */
export function readJournal(session: Pick<Session, 'events'>): JournalReading | undefined {
  const reading: JournalReading = { completed: new Map(), interrupted: 0, runs: 0 }
  const open = new Set<string>()
  for (const event of session.events()) {
    if (event.type === 'user/message') {
      const first = event.message.content[0]
      if (first?.type !== 'text' || !first.text.startsWith(RUN_HEADLINE)) continue
      const newline = first.text.indexOf('\n')
      reading.file = first.text.slice(RUN_HEADLINE.length, newline < 0 ? undefined : newline)
      reading.source = newline < 0 ? '' : first.text.slice(newline + 2)
      reading.runs++
    } else if (event.type === 'tool/call' && (event.call.name === AGENT_CALL || event.call.name === BEST_OF_CALL)) open.add(event.call.id)
    else if (event.type === 'tool/result' && open.delete(event.result.callId)) {
      const record = (event.record as { workflow?: CallRecord } | undefined)?.workflow
      if (record === undefined) {
        reading.interrupted++
        continue
      }
      if (event.result.isError || record.reused === true || record.stopReason !== 'completed') continue
      const list = reading.completed.get(record.key) ?? []
      list.push(record)
      reading.completed.set(record.key, list)
    }
  }
  return reading.runs === 0 ? undefined : reading
}
