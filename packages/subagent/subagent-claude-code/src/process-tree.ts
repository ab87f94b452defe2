/**
 * Finding and ending a child's whole process tree. The child is spawned as the leader of
 * its own process group, so one signal reaches everything it started in that group; the
 * descendants that moved to a group of their own are found by walking parent pids in
 * `/proc` (Linux) while their parent is still alive. A zombie counts as gone: it has
 * exited and only waits for a parent (possibly an init that never reaps) to collect it.
 */
import { readdirSync, readFileSync } from 'node:fs'

interface ProcStat {
  pid: number
  ppid: number
  pgrp: number
  state: string
}

/** Every process `/proc` shows, or `undefined` where there is no `/proc` (not Linux). */
function readProcTable(): ProcStat[] | undefined {
  let entries: string[]
  try {
    entries = readdirSync('/proc')
  } catch {
    return undefined
  }
  const table: ProcStat[] = []
  for (const entry of entries) {
    if (!/^\d+$/.test(entry)) continue
    const stat = readStat(Number(entry))
    if (stat) table.push(stat)
  }
  return table
}

function readStat(pid: number): ProcStat | undefined {
  let text: string
  try {
    text = readFileSync(`/proc/${pid}/stat`, 'utf8')
  } catch {
    // The process exited between listing and reading: it is simply not in the table.
    return undefined
  }
  // `pid (comm) state ppid pgrp …`; comm may hold spaces and parentheses, so split after the last `)`.
  const fields = text.slice(text.lastIndexOf(')') + 2).split(' ')
  return { pid, state: fields[0] ?? '?', ppid: Number(fields[1]), pgrp: Number(fields[2]) }
}

/** The live (non-zombie) members of the process group led by `root`, and every descendant of `root` wherever its group. */
export function processTree(root: number): number[] {
  const table = readProcTable()
  if (!table) return groupAlive(root) ? [root] : []
  const children = new Map<number, number[]>()
  for (const stat of table) children.set(stat.ppid, [...(children.get(stat.ppid) ?? []), stat.pid])
  const found = new Set<number>()
  for (const stat of table) if (stat.pgrp === root) found.add(stat.pid)
  const stack = [root]
  while (stack.length > 0) {
    const pid = stack.pop()!
    for (const child of children.get(pid) ?? []) {
      if (!found.has(child)) stack.push(child)
      found.add(child)
    }
  }
  const live = new Set(table.filter((stat) => stat.state !== 'Z').map((stat) => stat.pid))
  return [...found].filter((pid) => live.has(pid))
}

/** True when `pid` exists and is not a zombie. */
export function isAlive(pid: number): boolean {
  try {
    process.kill(pid, 0)
  } catch (error) {
    // ESRCH: no such process. EPERM means it exists but belongs to someone else: alive.
    return (error as NodeJS.ErrnoException).code === 'EPERM'
  }
  return readStat(pid)?.state !== 'Z'
}

function groupAlive(pgid: number): boolean {
  try {
    process.kill(-pgid, 0)
    return true
  } catch (error) {
    return (error as NodeJS.ErrnoException).code === 'EPERM'
  }
}

/** Signal the group and every known member; a process that is already gone is not an error. */
export function signalTree(pgid: number, pids: Iterable<number>, signal: NodeJS.Signals): void {
  for (const target of [-pgid, ...pids]) {
    try {
      process.kill(target, signal)
    } catch {
      // ESRCH: it exited on its own meanwhile, which is the outcome we want anyway.
    }
  }
}

/** Resolves `true` once none of `pids` (nor the group) is alive, `false` when `ms` passed first. */
export async function waitGone(pgid: number, pids: Iterable<number>, ms: number): Promise<boolean> {
  const watched = new Set(pids)
  const deadline = Date.now() + ms
  for (;;) {
    for (const pid of watched) if (!isAlive(pid)) watched.delete(pid)
    const members = processTree(pgid)
    for (const pid of members) watched.add(pid)
    if (watched.size === 0) return true
    if (Date.now() >= deadline) return false
    await new Promise((resolve) => setTimeout(resolve, 25))
  }
}
