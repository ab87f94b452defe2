import { assertNever } from '@dsh/base'
import type { TaskInfo, TaskRead } from '@dsh/tasks'

/** Labels are commands and descriptions: keep a status line to one readable line. */
const LABEL_CHARS = 80

/** `bash-1 completed (exit code 0) · bash: echo hi`: id, status with its detail, what it is. */
export function statusLine(task: TaskInfo, now = Date.now()): string {
  return `${task.id} ${statusText(task, now)} · ${task.kind}: ${shorten(task.label)}`
}

function statusText(task: TaskInfo, now: number): string {
  switch (task.status) {
    case 'running':
      if (task.queued) return `queued (${seconds(now - task.startedAt)}; waiting for a slot of its delegation tree)`
      return task.waiting !== undefined ? `running (${seconds(now - task.startedAt)}; waiting for ${task.waiting})` : `running (${seconds(now - task.startedAt)})`
    case 'completed':
      return task.detail ? `completed (${task.detail})` : 'completed'
    case 'failed':
    case 'killed':
      return task.detail ? `${task.status}: ${task.detail}` : task.status
    default:
      return assertNever(task.status, 'task status')
  }
}

/** What `task_output` returns: the status line, then the text (or why there is none). */
export function renderRead(read: TaskRead, options: { waitedMs?: number } = {}): string {
  const { task } = read
  const lines = [statusLine(task)]
  if (task.status === 'running' && options.waitedMs !== undefined) lines[0] += `; still running after waiting ${seconds(options.waitedMs)}`
  if (read.text) lines.push(read.text)
  else lines.push(emptyNote(task))
  return lines.join('\n')
}

function emptyNote(task: TaskInfo): string {
  if (task.outputMode === 'stream') return '(no new output)'
  if (task.status === 'running') return '(no answer yet: wait for it with task_output and wait: true, or stop it with task_kill)'
  return '(no output)'
}

export function renderList(tasks: readonly TaskInfo[]): string {
  if (tasks.length === 0) return 'no background tasks'
  const now = Date.now()
  return tasks.map((task) => statusLine(task, now)).join('\n')
}

/** What `task_kill` returns: whether this call stopped it, or it had already ended. */
export function renderKill(task: TaskInfo, wasLive: boolean): string {
  return wasLive ? statusLine(task) : `${statusLine(task)} (it had already ended; nothing to stop)`
}

/** The completion notice: one line per settled task and how to collect it. */
export function renderNotice(tasks: readonly TaskInfo[]): string {
  const lines = tasks.map((task) => `- ${statusLine(task)}`)
  const ids = tasks.map((task) => task.id).join(', ')
  return [`Background task update (${tasks.length === 1 ? 'one task' : `${tasks.length} tasks`} ended):`, ...lines, `Collect the output with task_output (${ids}).`].join('\n')
}

function shorten(label: string): string {
  const flat = label.replace(/\s+/g, ' ').trim()
  return flat.length > LABEL_CHARS ? `${flat.slice(0, LABEL_CHARS - 1)}…` : flat
}

function seconds(ms: number): string {
  return ms < 1000 ? `${Math.max(0, Math.round(ms))}ms` : `${Math.round(ms / 100) / 10}s`
}
