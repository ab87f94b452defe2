/**
 * Broken session files and hostile ids, through the built CLI: `dsh sessions show ID` and
 * `dsh run --resume ID` print one line naming the file (and the line, for a corrupt file),
 * exit 2, print no stack, and leave the file exactly as it was.
 */
import { mkdirSync, readFileSync, statSync, writeFileSync } from 'node:fs'
import { join } from 'node:path'
import { describe, expect, it } from 'vitest'
import { runDsh, tempDir } from './cli.js'

const header = (id: string, version = 1) => JSON.stringify({ kind: 'header', version, header: { id, createdAt: '2026-11-30T10:00:00.000Z', cwd: '/tmp', origin: 'cli' } })
const turnStart = JSON.stringify({ type: 'turn/start', turn: 1, seq: 0, ts: 1 })
const userMessage = JSON.stringify({ type: 'user/message', message: { role: 'user', content: [{ type: 'text', text: 'hi' }] }, seq: 1, ts: 1 })

interface BrokenCase {
  name: string
  id: string
  /** Writes the broken state into the session directory; returns the file the error must name, if any. */
  make(dir: string): string | undefined
  /** What the one line must contain besides the file. */
  says: string | RegExp
  /** Only resuming needs what is broken (`sessions show` prints a fork's own events without its parent's). */
  resumeOnly?: boolean
}

const cases: BrokenCase[] = [
  {
    name: 'a line in the middle that is not JSON',
    id: 'corrupt-middle',
    make: (dir) => write(dir, 'corrupt-middle', `${header('corrupt-middle')}\n${turnStart}\nnot json\n${userMessage}\n`),
    says: /corrupt-middle\.jsonl:3: not valid JSON/,
  },
  {
    name: 'a header cut short',
    id: 'torn-header',
    make: (dir) => write(dir, 'torn-header', header('torn-header').slice(0, 40)),
    says: /torn-header\.jsonl:1: the header line is not valid JSON/,
  },
  {
    name: 'an unknown format version',
    id: 'future',
    make: (dir) => write(dir, 'future', `${header('future', 2)}\n${turnStart}\n`),
    says: /future\.jsonl:1: format version 2 is not supported/,
  },
  {
    name: 'an empty file',
    id: 'empty',
    make: (dir) => write(dir, 'empty', ''),
    says: /empty\.jsonl:1: the file is empty/,
  },
  {
    name: 'an event out of sequence',
    id: 'gap',
    make: (dir) => write(dir, 'gap', `${header('gap')}\n${turnStart}\n${userMessage.replace('"seq":1', '"seq":5')}\n${turnStart.replace('"seq":0', '"seq":6')}\n`),
    says: /gap\.jsonl:3: .*seq 5, expected 1/,
  },
  {
    name: 'a header naming another session',
    id: 'impostor',
    make: (dir) => write(dir, 'impostor', `${header('someone-else')}\n${turnStart}\n`),
    says: /impostor\.jsonl:1: /,
  },
  {
    name: 'a directory where the file should be',
    id: 'a-directory',
    make: (dir) => {
      mkdirSync(join(dir, 'a-directory.jsonl'))
      return join(dir, 'a-directory.jsonl')
    },
    says: /a-directory\.jsonl: it is not a regular file/,
  },
  {
    name: 'a fork whose parent\'s file is gone',
    id: 'orphan-fork',
    make: (dir) => {
      const forkHeader = JSON.stringify({ kind: 'header', version: 1, header: { id: 'orphan-fork', createdAt: '2026-11-30T10:00:00.000Z', cwd: '/tmp', origin: 'subagent', parentSession: 'gone-parent', seedLength: 2 } })
      write(dir, 'orphan-fork', `${forkHeader}\n${turnStart.replace('"seq":0', '"seq":2').replace('"turn":1', '"turn":2')}\n`)
      // The line names the parent's missing file; the fork's own file must stay as it is.
      return undefined
    },
    says: /session orphan-fork is a fork of session gone-parent, whose stored file \S+gone-parent\.jsonl is gone/,
    resumeOnly: true,
  },
  { name: 'an id that climbs out of the directory', id: '../../etc/passwd', make: () => undefined, says: 'session id "../../etc/passwd" cannot be stored as a file' },
  { name: 'an id with a path separator', id: 'a/b', make: () => undefined, says: 'session id "a/b" cannot be stored as a file' },
  { name: 'the id ".."', id: '..', make: () => undefined, says: 'session id ".." cannot be stored as a file' },
]

function write(dir: string, id: string, text: string): string {
  const file = join(dir, `${id}.jsonl`)
  writeFileSync(file, text)
  return file
}

function snapshot(file: string | undefined): string | undefined {
  if (!file) return undefined
  const info = statSync(file)
  return info.isDirectory() ? `directory ${info.mtimeMs}` : `${readFileSync(file, 'base64')} ${info.mtimeMs}`
}

const commands = [
  ['dsh sessions show', (id: string, dir: string) => ['sessions', 'show', id, '--session-dir', dir]],
  ['dsh run --resume', (id: string, dir: string) => ['run', '--resume', id, '--model', 'scripted:examples/hello.yml', '--session-dir', dir, 'hello']],
] as const

describe.concurrent('broken session files and hostile ids', () => {
  for (const [command, argsOf] of commands) {
    for (const broken of cases.filter((candidate) => !candidate.resumeOnly || command === 'dsh run --resume')) {
      it(`${command} on ${broken.name}: one line naming it, exit 2, file untouched`, async () => {
        const dir = tempDir()
        const file = broken.make(dir)
        const before = snapshot(file)
        const result = await runDsh(argsOf(broken.id, dir))
        expect(result.code, result.stderr).toBe(2)
        const lines = result.stderr.trim().split('\n')
        expect(lines, result.stderr).toHaveLength(1)
        expect(lines[0]).not.toMatch(/^\s+at /)
        if (file) expect(lines[0]).toContain(file)
        if (typeof broken.says === 'string') expect(lines[0]).toContain(broken.says)
        else expect(lines[0]).toMatch(broken.says)
        expect(result.stdout).toBe('')
        expect(snapshot(file)).toBe(before)
      })
    }
  }

  it('a --session-dir that is a file is one line naming it, exit 2, for every command that reads sessions', async () => {
    const file = join(tempDir(), 'not-a-dir')
    writeFileSync(file, 'precious')
    for (const args of [['sessions', 'list'], ['sessions', 'show', 'x'], ['run', '--model', 'scripted:examples/hello.yml', 'hello'], ['config', 'check']]) {
      const result = await runDsh([...args, '--session-dir', file])
      expect(result.code, args.join(' ')).toBe(2)
      expect(result.stderr.trim().split('\n'), result.stderr).toEqual([expect.stringContaining(`the session directory ${file} is a file`)])
    }
    expect(readFileSync(file, 'utf8')).toBe('precious')
  })
})
