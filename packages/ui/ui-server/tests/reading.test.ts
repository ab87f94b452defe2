/**
 * What dsh ui reads, and from whom it takes requests: only regular files inside the
 * session directory (a symbolic link named like a session is not followed), within a
 * bound on one file and on all of them (a larger file is shown truncated, not read
 * whole), and only requests addressed to it by its own names (a DNS-rebinding page's
 * Host, another page's Origin: 403). Real files and a real server on 127.0.0.1.
 */
import { mkdirSync, mkdtempSync, realpathSync, symlinkSync, writeFileSync } from 'node:fs'
import { request as httpRequest } from 'node:http'
import { tmpdir } from 'node:os'
import { join } from 'node:path'
import { afterEach, describe, expect, it } from 'vitest'
import { FORMAT_VERSION } from '@dsh/session-jsonl'
import { serveUi } from '@dsh/ui-server'
import type { UiServer } from '../src/server.js'
import type { NodeView } from '../src/views.js'

let server: UiServer | undefined
afterEach(async () => {
  await server?.close()
  server = undefined
})

/** A session file's text: its header, then one user message per text. */
function sessionText(id: string, texts: string[]): string {
  const header = { kind: 'header', version: FORMAT_VERSION, header: { id, createdAt: new Date(1_000).toISOString(), cwd: '/' } }
  const events = texts.map((text, seq) => ({ seq, ts: 1_000 + seq, type: 'user/message', message: { role: 'user', content: [{ type: 'text', text }] } }))
  return [header, ...events].map((line) => JSON.stringify(line)).join('\n') + '\n'
}

function tempDir(): string {
  return realpathSync(mkdtempSync(join(tmpdir(), 'dsh-ui-reading-')))
}

async function get<T>(path: string): Promise<{ status: number; body: T }> {
  const { origin, searchParams } = new URL(server!.url)
  const response = await fetch(`${origin}${path}${path.includes('?') ? '&' : '?'}token=${searchParams.get('token')}`)
  return { status: response.status, body: (await response.json()) as T }
}

describe('dsh ui reads only regular files of its directory', () => {
  it('a session name that is a symbolic link to a file elsewhere is not followed: listed as a link, its session never shown', async () => {
    const dir = tempDir()
    const outside = tempDir()
    writeFileSync(join(dir, 'here-1.jsonl'), sessionText('here-1', ['shown']))
    writeFileSync(join(outside, 'secret-1.jsonl'), sessionText('secret-1', ['the secret outside']))
    symlinkSync(join(outside, 'secret-1.jsonl'), join(dir, 'secret-1.jsonl'))
    mkdirSync(join(dir, 'folder-1.jsonl'))
    server = await serveUi({ sessionDir: dir })
    const runs = await get<{ runs: Array<{ id: string }>; unreadable: Array<{ file: string; problem: string }> }>('/api/runs')
    expect(runs.body.runs.map((run) => run.id)).toEqual(['here-1'])
    expect(runs.body.unreadable.sort((a, b) => a.file.localeCompare(b.file))).toEqual([
      { file: 'folder-1.jsonl', problem: 'not a regular file: not read' },
      { file: 'secret-1.jsonl', problem: 'a symbolic link: not followed (only regular files in the session directory are read)' },
    ])
    expect((await get('/api/transcript/secret-1')).status).toBe(404)
  })
})

describe('dsh ui holds a bounded amount of the session files', () => {
  it('a file larger than the bound of one file is read only up to its last whole line within it, and the tree and the transcript say it was truncated', async () => {
    const dir = tempDir()
    const lines = Array.from({ length: 200 }, (_, index) => `message ${index} ${'x'.repeat(100)}`)
    const text = sessionText('big-1', lines)
    writeFileSync(join(dir, 'big-1.jsonl'), text)
    const fileBytes = 4096
    expect(Buffer.byteLength(text)).toBeGreaterThan(fileBytes * 5)
    server = await serveUi({ sessionDir: dir, limits: { fileBytes } })
    const tree = await get<NodeView>('/api/tree/big-1')
    expect(tree.body.truncated).toMatch(/^truncated: only the first [\d.]+ MB of [\d.]+ MB were read \(dsh ui's memory bound\); what came later is not shown$/)
    const transcript = await get<{ entries: Array<{ text: string }>; truncated?: string }>('/api/transcript/big-1')
    expect(transcript.body.truncated).toBe(tree.body.truncated)
    const shown = transcript.body.entries.map((entry) => entry.text)
    // Only whole lines within the bound: the first messages, in order, and nothing after the cut.
    expect(shown.length).toBeGreaterThan(0)
    expect(shown).toEqual(lines.slice(0, shown.length))
    expect(JSON.stringify(transcript.body.entries).length).toBeLessThan(fileBytes)
  })

  it('once the files read hold the whole bound, the next file is listed as not read, saying why', async () => {
    const dir = tempDir()
    const text = (id: string) => sessionText(id, [`${id} ${'y'.repeat(900)}`])
    for (const id of ['one-1', 'two-1', 'six-1']) writeFileSync(join(dir, `${id}.jsonl`), text(id))
    const size = Buffer.byteLength(text('one-1'))
    server = await serveUi({ sessionDir: dir, limits: { fileBytes: size, totalBytes: size * 2 } })
    const runs = await get<{ runs: Array<{ id: string }>; unreadable: Array<{ file: string; problem: string }> }>('/api/runs')
    expect({ runs: runs.body.runs.length, unreadable: runs.body.unreadable }).toMatchObject({ runs: 2, unreadable: [expect.anything()] })
    expect(runs.body.unreadable[0]!.problem).toMatch(/^not read: the sessions read already hold the whole bound of [\d.]+ MB/)
  })
})

describe('dsh ui answers only requests addressed to it', () => {
  it("a request with another Host (a DNS-rebinding page) or another page's Origin gets 403 with the reason, token or not; its own names are served", async () => {
    const dir = tempDir()
    writeFileSync(join(dir, 'here-1.jsonl'), sessionText('here-1', ['shown']))
    server = await serveUi({ sessionDir: dir })
    const { port, search } = new URL(server.url)
    const rebound = await raw(`/api/runs${search}`, { host: `attacker.example:${port}` })
    expect(rebound.status).toBe(403)
    expect(JSON.parse(rebound.body).error).toMatch(/^the Host header "attacker\.example:\d+" is not an address of this server/)
    const fromPage = await raw(`/api/runs${search}`, { host: `127.0.0.1:${port}`, origin: 'http://attacker.example' })
    expect(fromPage.status).toBe(403)
    expect(JSON.parse(fromPage.body).error).toMatch(/the Origin "http:\/\/attacker\.example" is not this server's own/)
    for (const host of [`127.0.0.1:${port}`, `localhost:${port}`]) expect((await raw(`/api/runs${search}`, { host, origin: `http://${host}` })).status).toBe(200)
  })
})

/** A GET with headers fetch cannot set (Host). */
function raw(path: string, headers: Record<string, string>): Promise<{ status: number; body: string }> {
  const { hostname, port } = new URL(server!.url)
  return new Promise((resolve, reject) => {
    const request = httpRequest({ host: hostname, port, path, headers }, (response) => {
      let body = ''
      response.setEncoding('utf8')
      response.on('data', (chunk: string) => (body += chunk))
      response.on('end', () => resolve({ status: response.statusCode ?? 0, body }))
    })
    request.once('error', reject)
    request.end()
  })
}
