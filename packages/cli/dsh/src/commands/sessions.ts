/**
 * `dsh sessions`: list stored sessions, show their lineage as a tree (from the session
 * headers alone), and print one as a readable transcript.
 */
import { assertNever, printable } from '@dsh/base'
import { emptyTotals, mergeTotals, textOf, type PriceTable } from '@dsh/llm'
import { parseDescriptor } from '@dsh/subagent'
import type { SessionEvent, SessionHeader, StoredSession, ToolPermissionRecord } from '@dsh/session'
import { startRuntime } from '../runtime.js'
import { UsageError } from '../errors.js'
import { resolveSessionId } from '../session-ids.js'
import { columnWidth, padColumns, truncateColumns } from '@dsh/subagent'
import { askedOrder, byAsking, delegationCalls, delegationOf, unstartedChildren, type UnstartedChild } from '@dsh/ui-server/delegations'
import { describeUsage, sessionUsage, treeUsage } from './usage.js'

interface Summary {
  header: SessionHeader
  firstPrompt: string
  /** Reason of the last `turn/end`, or `running`/`empty`. */
  stopReason: string
  /** Turns the session took (its own). */
  turns: number
  /** The log ends inside a turn. */
  open: boolean
}

export async function sessionsCommand(verb: string | undefined, args: string[], options: { sessionDir?: string; config?: string; usage?: boolean; endpoint?: string; verbose?: boolean }): Promise<number> {
  if (verb === 'show' && !args[0]) throw new UsageError('USAGE', 'dsh sessions show: which session? (an id from `dsh sessions list`)')
  const { usage: withUsage, endpoint, ...runtimeOptions } = options
  const runtime = await startRuntime({ ...runtimeOptions, verbose: runtimeOptions.verbose === true })
  try {
    const { sessions } = runtime.ctx
    switch (verb) {
      case undefined:
      case 'list':
        return await list(await sessions.listStored(), (id) => sessions.readStored(id))
      case 'tree':
        return await tree(await sessions.listStored(), args[0], (id) => sessions.readStored(id), withUsage ? runtime.ctx.llm.prices : undefined)
      case 'show': {
        // An exact id is read on its own: other sessions' files (broken ones included)
        // are looked at only to match a suffix. A broken file throws its one-line error.
        const stored = (await sessions.readStored(args[0])) ?? (await readBySuffix(args[0], () => sessions.listStored(), (id) => sessions.readStored(id)))
        if (!stored) throw new UsageError('SESSION', `dsh sessions show: no stored session ${args[0]}`)
        // A session file is input like any other: its bytes must not drive the terminal.
        process.stdout.write(printable(transcript(stored, sessions.locate(stored.header.id))))
        const { prices } = runtime.ctx.llm
        const below = await treeUsage(stored.header.id, childrenOf(shownOnce(await sessions.listStored())), (id) => sessions.readStored(id), prices)
        process.stdout.write(`\nusage: ${describeUsage(sessionUsage(stored, prices), prices)}\n`)
        if (below.sessions > 1) {
          process.stdout.write(`usage of its delegation tree (${below.sessions} sessions): ${describeUsage(below.totals, prices)}\n`)
          // Each delegated child's own, so a user sees which child spent what.
          const rows = below.rows.slice(1).map((row) => `${'  '.repeat(row.depth)}${row.header.id}  ${row.header.provider ?? row.header.origin ?? 'session'}${row.header.label ? ` "${clip(row.header.label, 40)}"` : ''}: ${describeUsage(row.totals, prices)}`)
          process.stdout.write(printable(`${rows.join('\n')}\n`))
        }
        return 0
      }
      case 'trace':
        return await (await import('./sessions-trace.js')).sessionsTrace(args, runtime, { ...(endpoint !== undefined && { endpoint }) })
      default:
        throw new UsageError('USAGE', `dsh sessions: unknown verb "${verb}" (list, tree [ID], show ID, trace ID)`)
    }
  } finally {
    await runtime.dispose()
  }
}

async function readBySuffix(wanted: string, listStored: () => Promise<SessionHeader[]>, read: (id: string) => Promise<StoredSession | undefined>): Promise<StoredSession | undefined> {
  const id = resolveSessionId(await listStored(), wanted)
  return id === wanted ? undefined : read(id)
}

async function summarize(header: SessionHeader, read: (id: string) => Promise<StoredSession | undefined>): Promise<Summary> {
  const stored = await read(header.id).catch(() => undefined)
  const events = stored?.events ?? []
  const firstUser = events.find((event) => event.type === 'user/message')
  const lastEnd = [...events].reverse().find((event) => event.type === 'turn/end')
  return {
    header,
    firstPrompt: firstUser?.type === 'user/message' ? textOf(firstUser.message.content) : '',
    stopReason: lastEnd?.type === 'turn/end' ? lastEnd.reason : events.length ? 'running' : 'empty',
    turns: events.filter((event) => event.type === 'turn/start').length,
    open: openTurn(events),
  }
}

/**
 * The sessions to show, each child once: a remote continuable child's parent-side record
 * is left out when its remote session is stored here under the same parent (both log the
 * child's answers, with their usage).
 */
function shownOnce(headers: SessionHeader[]): SessionHeader[] {
  const hidden = new Set(remoteRecords(headers).values())
  return headers.filter((header) => !hidden.has(header))
}

/** Remote continuable children's records by the id of their remote session, when it is stored here under the same parent. */
function remoteRecords(headers: readonly SessionHeader[]): Map<string, SessionHeader> {
  const byId = new Map(headers.map((header) => [header.id, header]))
  const recordOf = new Map<string, SessionHeader>()
  for (const header of headers) {
    const remoteId = remoteIdOf(header)
    if (remoteId !== undefined && byId.get(remoteId)?.parentSession === header.parentSession) recordOf.set(remoteId, header)
  }
  return recordOf
}

/** The remote session a remote continuable child's record stands for. */
function remoteIdOf(header: SessionHeader): string | undefined {
  const parsed = header.descriptor === undefined ? undefined : parseDescriptor(header.descriptor)
  return parsed && 'descriptor' in parsed ? parsed.descriptor.remote?.remoteId : undefined
}

/** Whether the log ends inside a turn (its writer is running it, or stopped mid-turn). */
function openTurn(events: readonly SessionEvent[]): boolean {
  for (let i = events.length - 1; i >= 0; i--) {
    if (events[i].type === 'turn/end') return false
    if (events[i].type === 'turn/start') return true
  }
  return false
}

function childrenOf(headers: SessionHeader[]): Map<string, SessionHeader[]> {
  const children = new Map<string, SessionHeader[]>()
  for (const header of headers) {
    if (!header.parentSession) continue
    children.set(header.parentSession, [...(children.get(header.parentSession) ?? []), header])
  }
  for (const list of children.values()) list.sort((a, b) => a.createdAt.localeCompare(b.createdAt))
  return children
}

/**
 * A session's children as `sessions tree` draws them and `sessions list` counts them (one
 * function, so the two never disagree): its child sessions stored here, and those its
 * delegation records say are stored elsewhere (a Codex thread, a Claude Code session, an
 * A2A task on another host), and those that never started (a budget or the tree's cap
 * refused them, or they were still queued when it ended), read as `dsh ui` reads them.
 */
async function childrenBelow(header: SessionHeader, children: ReadonlyMap<string, SessionHeader[]>, byId: ReadonlyMap<string, SessionHeader>, read: (id: string) => Promise<StoredSession | undefined>): Promise<{ kids: SessionHeader[]; away: ElsewhereChild[]; unstarted: UnstartedChild[]; stored: StoredSession | undefined }> {
  const kids = children.get(header.id) ?? []
  const stored = await read(header.id).catch(() => undefined)
  const started = new Set(kids.flatMap((kid) => (kid.toolCallId === undefined ? [] : [kid.toolCallId])))
  const unstarted = stored ? unstartedChildren(stored.events, started, openTurn(stored.events)) : []
  return { kids, away: elsewhereChildren(stored, kids, byId), unstarted, stored }
}

/** A child that never started, on its line: its task or call, the tool and label, and why. */
function unstartedLine(child: UnstartedChild): string {
  const who = child.helper !== undefined ? `${child.helper} (${child.tool})` : child.tool
  const state = child.state === 'queued' ? 'queued (waiting for a slot of its tree\'s cap)' : `not started${child.reason !== undefined ? `: ${clip(child.reason, 200)}` : ''}`
  return `${child.taskId ?? `call ${child.callId}`}  ${who}${child.label ? ` "${clip(child.label, 40)}"` : ''}  ${state}`
}

/** Every child below a session, at any depth: the lines `sessions tree` draws under it. */
async function descendants(header: SessionHeader, children: ReadonlyMap<string, SessionHeader[]>, byId: ReadonlyMap<string, SessionHeader>, read: (id: string) => Promise<StoredSession | undefined>): Promise<number> {
  const { kids, away, unstarted } = await childrenBelow(header, children, byId, read)
  let count = kids.length + away.length + unstarted.length
  for (const kid of kids) count += await descendants(kid, children, byId, read)
  return count
}

/** One line of at most `columns` terminal columns. */
function clip(text: string, columns: number): string {
  return truncateColumns(text.replace(/\s+/g, ' ').trim(), columns)
}

function when(iso: string): string {
  return iso.replace('T', ' ').slice(0, 19)
}

async function list(headers: SessionHeader[], read: (id: string) => Promise<StoredSession | undefined>): Promise<number> {
  // A remote child recorded twice (its own session and the parent-side record) counts once.
  const children = childrenOf(shownOnce(headers))
  const byId = new Map(headers.map((header) => [header.id, header]))
  const roots = headers.filter((header) => !header.parentSession || !headers.some((other) => other.id === header.parentSession))
  roots.sort((a, b) => b.createdAt.localeCompare(a.createdAt))
  if (roots.length === 0) {
    process.stdout.write('no sessions yet\n')
    return 0
  }
  // Ids differ in length (a session made by an ACP client or an A2A task has its own form): pad them so the columns align.
  const idWidth = Math.max(...roots.map((header) => columnWidth(printable(header.id))))
  for (const header of roots) {
    const summary = await summarize(header, read)
    const count = await descendants(header, children, byId, read)
    process.stdout.write(`${padColumns(printable(header.id), idWidth)}  ${when(header.createdAt)}  ${String(count).padStart(3)} ${count === 1 ? 'child   ' : 'children'}  ${printable(clip(summary.firstPrompt, 60))}\n`)
  }
  return 0
}

export async function tree(headers: SessionHeader[], wanted: string | undefined, read: (id: string) => Promise<StoredSession | undefined>, prices: PriceTable | undefined): Promise<number> {
  const byId = new Map(headers.map((header) => [header.id, header]))
  // A remote continuable child is shown once. When the remote session is stored here under
  // the same parent (a `dsh acp` child records its lineage), its own line carries the
  // parent-side record's continuable facts and the record is not shown; otherwise the
  // record stands for the child.
  const recordOf = remoteRecords(headers)
  const hidden = new Set([...recordOf.values()])
  const children = childrenOf(headers.filter((header) => !hidden.has(header)))
  const storedElsewhere = (header: SessionHeader) => header.parentSession !== undefined && !byId.has(header.parentSession)
  // What to draw: one stored session and its descendants, or a parent stored elsewhere
  // (the delegating session on another host) and every session here that it started.
  let root: SessionHeader | undefined
  let foreignParent: string | undefined
  if (wanted) {
    root = byId.get(resolveSessionId(headers, wanted))
    if (!root && children.has(wanted)) foreignParent = wanted
    else if (!root) throw new UsageError('USAGE', `dsh sessions tree: no stored session ${wanted}`)
  } else {
    // As in `list`: a session whose parent is stored elsewhere (a worker's A2A or ACP task) is a root here.
    root = headers.filter((header) => !header.parentSession || storedElsewhere(header)).sort((a, b) => b.createdAt.localeCompare(a.createdAt))[0]
    if (!root) {
      process.stdout.write('no sessions yet\n')
      return 0
    }
    // A worker's tasks are all roots here; the newest alone would hide its siblings.
    if (storedElsewhere(root)) foreignParent = root.parentSession
  }
  const lines: string[] = []
  let total = emptyTotals()
  let counted = 0
  const visit = async (header: SessionHeader, prefix: string, branch: string, recordedHelper?: string) => {
    const summary = await summarize(header, read)
    // Usage only when asked for (--usage): the plain tree's lines stay as scripts parse them.
    const used = prices && sessionUsage(await read(header.id).catch(() => undefined), prices)
    if (used) total = mergeTotals(total, used)
    counted++
    const record = recordOf.get(header.id)
    // A helper's name from the child's own header, else from the parent's delegation record (a remote child's header is not ours).
    const helper = header.helper?.name ?? recordedHelper
    const provider = header.provider ?? header.origin ?? 'session'
    const who = helper !== undefined ? `${helper} (${provider})` : provider
    const label = header.label ? ` "${clip(header.label, 40)}"` : summary.firstPrompt ? ` "${clip(summary.firstPrompt, 40)}"` : ''
    const seed = header.seedLength ? ` (seeded ${header.seedLength} events)` : ''
    const elsewhere = storedElsewhere(header) ? (foreignParent !== undefined ? `  (depth ${header.delegationDepth ?? '?'})` : `  (parent ${header.parentSession}, depth ${header.delegationDepth ?? '?'}, stored elsewhere)`) : ''
    // A continuable child is one session however many turns it takes: one line, its turns and state.
    const facts = record ? await summarize(record, read) : header.descriptor ? summary : undefined
    const continuable = facts ? `  continuable: ${facts.turns} ${facts.turns === 1 ? 'turn' : 'turns'}, ${facts.open ? 'running' : 'idle'}` : ''
    lines.push(`${prefix}${branch}${header.id}  ${who}${label}  ${summary.stopReason}${seed}${elsewhere}${continuable}${used && prices ? `  [${describeUsage(used, prices)}]` : ''}`)
    const { kids, away, unstarted, stored } = await childrenBelow(header, children, byId, read)
    const helpers = helpersOfChildren(stored)
    const childPrefix = prefix + (branch === '' ? '' : branch === '└─ ' ? '   ' : '│  ')
    // Every kind of child in the order the parent asked for them, as `dsh ui` lists them.
    const order = byAsking(askedOrder(stored?.events ?? []))
    // A remote child stored here (a `dsh acp` one) has its call only in the parent's record.
    const recordedCalls = delegationCalls(stored?.events ?? [])
    const below: Array<{ call?: string; at: number; draw: (branch: string) => Promise<void> | void }> = [
      ...kids.map((kid) => ({ call: kid.toolCallId ?? recordedCalls.get(kid.id), at: Date.parse(kid.createdAt), draw: (branch: string) => visit(kid, childPrefix, branch, helpers.get(kid.id)) })),
      ...away.map((child) => {
        const helper = helpers.get(child.childId)
        return { call: child.callId, at: child.at, draw: (branch: string) => void lines.push(`${childPrefix}${branch}${child.childId}  ${helper !== undefined ? `${helper} (${child.provider})` : child.provider}${child.label ? ` "${clip(child.label, 40)}"` : ''}  stored elsewhere: ${child.storedAt ?? 'not in this directory'}`) }
      }),
      ...unstarted.map((child) => ({ call: child.callId, at: child.at, draw: (branch: string) => void lines.push(`${childPrefix}${branch}${unstartedLine(child)}`) })),
    ]
    below.sort(order)
    for (const [index, child] of below.entries()) await child.draw(index === below.length - 1 ? '└─ ' : '├─ ')
  }
  if (foreignParent !== undefined) {
    const siblings = children.get(foreignParent) ?? []
    lines.push(`${foreignParent}  (stored elsewhere; ${siblings.length} ${siblings.length === 1 ? 'session' : 'sessions'} here)`)
    for (const [index, child] of siblings.entries()) await visit(child, '', index === siblings.length - 1 ? '└─ ' : '├─ ')
  } else {
    await visit(root!, '', '')
  }
  if (prices) lines.push(`usage of the tree (${counted} ${counted === 1 ? 'session' : 'sessions'}): ${describeUsage(total, prices)}`)
  process.stdout.write(printable(`${lines.join('\n')}\n`))
  return 0
}

interface ElsewhereChild {
  childId: string
  /** The parent's delegation call, and when its result was recorded. */
  callId: string
  at: number
  provider: string
  label?: string
  storedAt?: string
}

/**
 * The children a session's delegation calls record (`record.delegation` on their
 * `tool/result`) that are not sessions of this directory: an A2A worker's task, a Codex
 * thread, an ACP agent that stores elsewhere. A remote child's id is `<provider>:<its own
 * id>`, which for a dsh acp child is its session id here; a child stored here under the same
 * provider and label (an A2A worker sharing the directory) stands for the record.
 */
function elsewhereChildren(stored: StoredSession | undefined, kids: readonly SessionHeader[], byId: ReadonlyMap<string, SessionHeader>): ElsewhereChild[] {
  if (!stored) return []
  const unmatched = [...kids]
  const away: ElsewhereChild[] = []
  const labels = new Map<string, string>()
  for (const event of stored.events) {
    if (event.type === 'tool/call') labels.set(event.call.id, typeof (event.call.args as { description?: unknown } | undefined)?.description === 'string' ? (event.call.args as { description: string }).description : '')
    if (event.type !== 'tool/result') continue
    const delegation = delegationOf(event.record)
    if (!delegation || delegation.local) continue
    const ownId = delegation.childId.startsWith(`${delegation.provider}:`) ? delegation.childId.slice(delegation.provider.length + 1) : delegation.childId
    if (byId.has(ownId)) continue
    const label = labels.get(event.result.callId) || undefined
    const standIn = unmatched.findIndex((kid) => kid.provider === delegation.provider && kid.label === label)
    if (standIn >= 0) {
      unmatched.splice(standIn, 1)
      continue
    }
    away.push({ childId: delegation.childId, callId: event.result.callId, at: event.ts, provider: delegation.provider, ...(label !== undefined && { label }), ...(delegation.storedAt !== undefined && { storedAt: delegation.storedAt }) })
  }
  return away
}

/** The helper each child of a session ran, by child id (a remote child by its own id too), from the session's delegation records. */
function helpersOfChildren(stored: StoredSession | undefined): Map<string, string> {
  const helpers = new Map<string, string>()
  for (const event of stored?.events ?? []) {
    if (event.type !== 'tool/result') continue
    const delegation = event.record?.delegation as { childId?: unknown; provider?: unknown; helper?: unknown } | undefined
    if (typeof delegation?.helper !== 'string' || typeof delegation.childId !== 'string') continue
    helpers.set(delegation.childId, delegation.helper)
    const prefix = `${String(delegation.provider)}:`
    if (delegation.childId.startsWith(prefix)) helpers.set(delegation.childId.slice(prefix.length), delegation.helper)
  }
  return helpers
}

export function transcript(stored: StoredSession, location?: string): string {
  const { header, events } = stored
  const lineage = [
    header.parentSession && `parent ${header.parentSession}`,
    header.provider && `provider ${header.provider}`,
    header.helper && `helper ${header.helper.name} (definition ${header.helper.hash})`,
    header.delegationDepth !== undefined && `depth ${header.delegationDepth}`,
    header.budget && `budget handed to it: ${Object.entries(header.budget).map(([limit, value]) => `${limit} ${value}`).join(', ')}`,
    header.seedLength && `seeded with ${header.seedLength} events of its parent`,
  ].filter(Boolean)
  const out = [`session ${header.id}  ${when(header.createdAt)}  ${header.origin ?? ''}${lineage.length ? `  (${lineage.join(', ')})` : ''}`, `cwd ${header.cwd}${location ? `  file ${location}` : ''}`]
  for (const event of events) {
    const line = describeEvent(event)
    if (line !== undefined) out.push(line)
  }
  return `${out.join('\n')}\n`
}

function indent(text: string, prefix: string): string {
  return text.split('\n').map((line, index) => (index === 0 ? line : `${prefix}${line}`)).join('\n')
}

/** `✓ allowed once by the user (rule bash(npm test*)) at 12:00:01`: how a side effect was decided. */
function permissionLine(permission: ToolPermissionRecord): string {
  const verdict = permission.decision === 'reject' ? `✗ rejected by ${permission.by}: ${permission.reason}` : `✓ ${permission.decision === 'allow-always' ? 'allowed always' : 'allowed once'} by ${permission.by}`
  const rule = permission.rule !== undefined ? ` (rule ${permission.rule})` : ''
  const at = permission.at !== undefined ? ` at ${new Date(permission.at).toISOString().slice(11, 19)}` : ''
  return clip(`${verdict}${rule}${at}`, 300)
}

function describeEvent(event: SessionEvent): string | undefined {
  switch (event.type) {
    case 'turn/start':
      return `\n── turn ${event.turn}`
    case 'user/message':
      return `user: ${indent(textOf(event.message.content), '      ')}`
    case 'assistant/message': {
      const text = textOf(event.message.content)
      return text ? `assistant: ${indent(text, '           ')}` : undefined
    }
    case 'tool/call':
      return `  → ${event.call.name} ${clip(event.call.rawArgs ?? JSON.stringify(event.call.args), 200)}`
    case 'tool/result':
      return `${event.permission ? `  ${permissionLine(event.permission)}\n` : ''}  ← ${event.result.name}${event.result.isError ? ' (error)' : ''}: ${indent(clip(textOf(event.result.content), 400), '    ')}`
    case 'approval':
      return `  ? ${clip(event.request.path.join(' › '), 120)} asked to run ${event.request.tool}: ${clip(event.request.subject, 200)}\n  ${permissionLine(event.permission)}`
    case 'hook/run':
      return `  ⚑ ${event.event} hook ${clip(JSON.stringify(event.command), 120)}: ${event.exitCode !== undefined ? `exit ${event.exitCode}` : 'did not exit'}, ${event.durationMs} ms${event.decision ? `, ${event.decision}` : ''}${event.note ? ` (${clip(event.note, 200)})` : ''}`
    case 'turn/end':
      return `── turn ${event.turn} ended ${event.reason}${event.error ? `: ${event.error}` : ''}`
    case 'step/start':
    case 'step/end':
    case 'input/queued':
    case 'input/taken':
      return undefined
    default:
      return assertNever(event, 'session event')
  }
}
