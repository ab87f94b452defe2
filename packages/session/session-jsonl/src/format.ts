import type { SessionEvent, SessionHeader } from '@dsh/session'

/**
 * The on-disk vocabulary, typed once. A session file is JSON Lines, each line ending in
 * `\n`:
 *
 * - line 1, written once when the session is created:
 *   `{"kind":"header","version":1,"header":{…SessionHeader}}`
 * - one line per durable event, in seq order: the `SessionEvent` itself
 *   (`{"type":"turn/start","turn":1,"seq":0,"ts":…}`)
 * - when a later process resumes the session, before its first new event:
 *   `{"kind":"resume","seq":<that event's seq>,"ts":…}`
 *
 * Records carry `kind`; events carry `type` and never `kind`.
 */
export const FORMAT_VERSION = 1

export interface HeaderRecord {
  kind: 'header'
  version: typeof FORMAT_VERSION
  header: SessionHeader
}

/**
 * Written when appending resumes on an existing file. It tells the reader that any
 * unreadable lines right before it are the torn tail of an earlier, interrupted writer
 * (see the README's crash-recovery rule) and where the events continue.
 */
export interface ResumeRecord {
  kind: 'resume'
  /** The seq of the first event appended by the resuming writer. */
  seq: number
  ts: number
}

export type FileRecord = HeaderRecord | ResumeRecord

export function headerLine(header: SessionHeader): string {
  const record: HeaderRecord = { kind: 'header', version: FORMAT_VERSION, header }
  return JSON.stringify(record) + '\n'
}

export function resumeLine(seq: number, ts = Date.now()): string {
  const record: ResumeRecord = { kind: 'resume', seq, ts }
  return JSON.stringify(record) + '\n'
}

export function eventLine(event: SessionEvent): string {
  return JSON.stringify(event) + '\n'
}
