/**
 * `dsh acp` reads and writes through its client's fs when the client offers it. The
 * official ACP SDK's client drives the built `dsh acp` whose scripted model calls `read`
 * and `edit`: the client's `fs/read_text_file` answers with its unsaved text, which is what
 * the model gets, and the edit arrives as `fs/write_text_file` after the client was asked
 * about it, the file on disk untouched. A client that offers no fs sees the tools act on
 * the disk as before; a path outside the session's directory and a write the permission
 * policy refuses never reach the client.
 */
import { spawn } from 'node:child_process'
import { readFileSync, realpathSync, writeFileSync } from 'node:fs'
import { join } from 'node:path'
import { Readable, Writable } from 'node:stream'
import { afterEach, describe, expect, it } from 'vitest'
import { client, methods, ndJsonStream, PROTOCOL_VERSION, type ClientCapabilities, type SessionUpdate } from '@agentclientprotocol/sdk'
import { killRunning, running } from './acp-client.js'
import { dshBin, repoRoot, tempDir } from './cli.js'

afterEach(killRunning)

/** What the client was asked, in order: permissions, reads and writes. */
type Asked = { method: 'permission'; title: string } | { method: 'read'; path: string } | { method: 'write'; path: string; content: string }

/**
 * `dsh acp` with a scripted model, driven by an SDK client that keeps `buffers` (an
 * editor's unsaved text, by absolute path) and offers `fs` as `capabilities` say; every
 * permission asked is allowed once unless `--permission` says otherwise.
 */
async function promptWithEditor(options: { cwd: string; model: string; capabilities: ClientCapabilities; buffers: Map<string, string>; permission?: string }): Promise<{ asked: Asked[]; updates: SessionUpdate[]; stopReason: string; stderr: () => string }> {
  const sessions = tempDir('acp-fs-sessions-')
  const child = spawn(process.execPath, [dshBin, 'acp', '--model', `scripted:${options.model}`, '--session-dir', sessions, '--permission', options.permission ?? 'ask'], {
    cwd: repoRoot,
    env: { ...process.env, DSH_HOME: tempDir('dsh-home-'), DEEPSEEK_API_KEY: '', OPENAI_API_KEY: '' },
    stdio: ['pipe', 'pipe', 'pipe'],
  })
  running.push(child)
  let stderr = ''
  child.stderr!.on('data', (chunk: Buffer) => (stderr += chunk.toString('utf8')))
  const asked: Asked[] = []
  const app = client({ name: 'acp-fs-test' })
    .onRequest(methods.client.session.requestPermission, ({ params }) => {
      asked.push({ method: 'permission', title: params.toolCall.title ?? '' })
      const option = params.options.find((candidate) => candidate.kind === 'allow_once')!
      return { outcome: { outcome: 'selected', optionId: option.optionId } }
    })
    .onRequest(methods.client.fs.readTextFile, ({ params }) => {
      asked.push({ method: 'read', path: params.path })
      return { content: options.buffers.get(params.path) ?? readFileSync(params.path, 'utf8') }
    })
    .onRequest(methods.client.fs.writeTextFile, ({ params }) => {
      asked.push({ method: 'write', path: params.path, content: params.content })
      options.buffers.set(params.path, params.content)
      return {}
    })
  const connection = app.connect(ndJsonStream(Writable.toWeb(child.stdin!) as WritableStream<Uint8Array>, Readable.toWeb(child.stdout!) as ReadableStream<Uint8Array>))
  const { agent } = connection
  await agent.request(methods.agent.initialize, { protocolVersion: PROTOCOL_VERSION, clientCapabilities: options.capabilities })
  const session = await agent.buildSession(options.cwd).start()
  void session.prompt('work on the notes')
  const updates: SessionUpdate[] = []
  for (;;) {
    const message = await session.nextUpdate()
    if (message.kind === 'stop') {
      child.stdin!.end()
      return { asked, updates, stopReason: message.stopReason, stderr: () => stderr }
    }
    updates.push(message.update)
  }
}

/** A model that reads `path`, edits it, and says what the read gave it. */
function readAndEdit(dir: string, path: string): string {
  const file = join(dir, 'model.yml')
  writeFileSync(
    file,
    [
      '- when: { prompt: "notes" }',
      '  reply:',
      `    - call: { tool: read, args: { path: ${JSON.stringify(path)} } }`,
      `    - call: { tool: edit, args: { path: ${JSON.stringify(path)}, old_string: draft, new_string: final } }`,
      '    - text: "done: {{last_tool_result}}"',
    ].join('\n'),
  )
  return file
}

/** The text of each tool call's final update, in order: what the model was given. */
function toolResults(updates: SessionUpdate[]): string[] {
  return updates.flatMap((update) =>
    update.sessionUpdate === 'tool_call_update' && (update.status === 'completed' || update.status === 'failed')
      ? [(update.content ?? []).map((block) => (block.type === 'content' && block.content.type === 'text' ? block.content.text : '')).join('')]
      : [],
  )
}

const FS: ClientCapabilities = { fs: { readTextFile: true, writeTextFile: true } }

describe('dsh acp: the file tools through the client\'s fs', () => {
  it('read gets the client\'s unsaved text and edit writes through the client after it was asked; the disk is untouched', async () => {
    const cwd = realpathSync(tempDir('acp-fs-cwd-'))
    const notes = join(cwd, 'notes.txt')
    writeFileSync(notes, 'saved text\n')
    const buffers = new Map([[notes, 'unsaved draft\n']])
    const { asked, updates, stopReason } = await promptWithEditor({ cwd, model: readAndEdit(tempDir(), 'notes.txt'), capabilities: FS, buffers })
    expect(stopReason).toBe('end_turn')
    // What the client returned is what the model got.
    expect(toolResults(updates)).toEqual(['     1\tunsaved draft', 'edited notes.txt: line 1'])
    // The edit read the client's text again, was asked about, then written through the client.
    expect(asked).toEqual([
      { method: 'read', path: notes },
      { method: 'permission', title: 'edit notes.txt' },
      { method: 'read', path: notes },
      { method: 'write', path: notes, content: 'unsaved final\n' },
    ])
    expect(readFileSync(notes, 'utf8')).toBe('saved text\n')
  })

  it('a client that offers no fs sees the tools read and write the disk, as before', async () => {
    const cwd = realpathSync(tempDir('acp-fs-cwd-'))
    const notes = join(cwd, 'notes.txt')
    writeFileSync(notes, 'a draft\n')
    const { asked, updates } = await promptWithEditor({ cwd, model: readAndEdit(tempDir(), 'notes.txt'), capabilities: {}, buffers: new Map([[notes, 'never read\n']]) })
    expect(toolResults(updates)).toEqual(['     1\ta draft', 'edited notes.txt: line 1'])
    expect(asked).toEqual([{ method: 'permission', title: 'edit notes.txt' }])
    expect(readFileSync(notes, 'utf8')).toBe('a final\n')
  })

  it('a path outside the session\'s directory is refused before the client is asked, and with --permission reject the edit never reaches it', async () => {
    const cwd = realpathSync(tempDir('acp-fs-cwd-'))
    const outside = join(realpathSync(tempDir('acp-fs-outside-')), 'secret.txt')
    writeFileSync(outside, 'secret draft\n')
    const escaped = await promptWithEditor({ cwd, model: readAndEdit(tempDir(), outside), capabilities: FS, buffers: new Map() })
    const [read, edit] = toolResults(escaped.updates)
    expect(read).toMatch(/^read: .*secret\.txt is outside the working directory /)
    expect(edit).toMatch(/^edit: .*secret\.txt is outside the working directory /)
    expect(escaped.asked.filter((entry) => entry.method !== 'permission')).toEqual([])

    const notes = join(cwd, 'notes.txt')
    writeFileSync(notes, 'a draft\n')
    const buffers = new Map<string, string>()
    const refused = await promptWithEditor({ cwd, model: readAndEdit(tempDir(), 'notes.txt'), capabilities: FS, buffers, permission: 'reject' })
    expect(toolResults(refused.updates)[1]).toMatch(/^edit was not run: permission denied by dsh acp --permission reject/)
    expect(refused.asked).toEqual([{ method: 'read', path: notes }])
    expect(buffers.size).toBe(0)
    expect(readFileSync(notes, 'utf8')).toBe('a draft\n')
    expect(readFileSync(outside, 'utf8')).toBe('secret draft\n')
  })
})
