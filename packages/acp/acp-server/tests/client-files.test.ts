/**
 * `dsh acp`'s file tools through its client's fs, in process: a real SDK client app serves
 * `fs/read_text_file` and `fs/write_text_file` from its own buffers. What the client offers
 * is what is used (a client that reads only has writes made here); its error answer is the
 * call's one-line refusal with nothing written; what it answers is held to the tools'
 * bounds (a NUL byte is a binary file).
 */
import { mkdtempSync, readFileSync, realpathSync, writeFileSync } from 'node:fs'
import { tmpdir } from 'node:os'
import { join } from 'node:path'
import { afterEach, describe, expect, it } from 'vitest'
import { client, methods, PROTOCOL_VERSION, RequestError, type ClientCapabilities, type ClientConnection, type SessionUpdate, type Stream } from '@agentclientprotocol/sdk'
import { ApprovalService } from '@dsh/approvals'
import { FilesToolPlugin } from '@dsh/tool-files'
import { createHarness, type Harness, type HarnessOptions } from '@dsh/testkit/harness'
import { serveAcp } from '@dsh/acp-server'

let harness: Harness | undefined
let connection: ClientConnection | undefined
afterEach(async () => {
  connection?.close()
  await harness?.dispose()
  harness = undefined
  connection = undefined
})

/** An editor's buffers by absolute path; every fs request logged; a write refused with `refuseWrites`. */
class EditorBuffers {
  readonly log: string[] = []
  readonly buffers = new Map<string, string>()
  refuseWrites: string | undefined

  read(path: string): { content: string } {
    this.log.push(`read ${path}`)
    return { content: this.buffers.get(path) ?? readFileSync(path, 'utf8') }
  }

  write(path: string, content: string): Record<string, never> {
    this.log.push(`write ${path}`)
    if (this.refuseWrites !== undefined) throw new RequestError(-32003, this.refuseWrites)
    this.buffers.set(path, content)
    return {}
  }
}

/** A harness with the file tools served to an SDK client offering `capabilities`, allowing every permission once. */
async function serve(script: HarnessOptions['script'], capabilities: ClientCapabilities) {
  harness = await createHarness({ script })
  await harness.plugin(ApprovalService)
  await harness.plugin(FilesToolPlugin, {})
  const editor = new EditorBuffers()
  const toServer = new TransformStream()
  const toClient = new TransformStream()
  serveAcp(harness.ctx, { readable: toServer.readable, writable: toClient.writable } as Stream, { permission: 'ask' })
  connection = client({ name: 'test-editor' })
    .onRequest(methods.client.session.requestPermission, ({ params }) => ({ outcome: { outcome: 'selected', optionId: params.options.find((option) => option.kind === 'allow_once')!.optionId } }))
    .onRequest(methods.client.fs.readTextFile, ({ params }) => editor.read(params.path))
    .onRequest(methods.client.fs.writeTextFile, ({ params }) => editor.write(params.path, params.content))
    .connect({ readable: toClient.readable, writable: toServer.writable } as Stream)
  await connection.agent.request(methods.agent.initialize, { protocolVersion: PROTOCOL_VERSION, clientCapabilities: capabilities })
  const cwd = realpathSync(mkdtempSync(join(tmpdir(), 'acp-client-files-')))
  const session = await connection.agent.buildSession(cwd).start()
  return { editor, session, cwd }
}

/** The text of each tool call's result, as the client saw it. */
async function toolResults(session: Awaited<ReturnType<typeof serve>>['session']): Promise<string[]> {
  void session.prompt('go').catch(() => {})
  const updates: SessionUpdate[] = []
  for (;;) {
    const message = await session.nextUpdate()
    if (message.kind === 'stop') break
    updates.push(message.update)
  }
  return updates.flatMap((update) =>
    update.sessionUpdate === 'tool_call_update' && update.status !== undefined && update.status !== null && update.status !== 'in_progress'
      ? [(update.content ?? []).map((block) => (block.type === 'content' && block.content.type === 'text' ? block.content.text : '')).join('')]
      : [],
  )
}

const calls = (...list: Array<{ tool: string; args: Record<string, unknown> }>): NonNullable<HarnessOptions['script']> => [{ reply: [...list.map((call) => ({ call })), { text: 'done' }] }]
const edit = { tool: 'edit', args: { path: 'notes.txt', old_string: 'draft', new_string: 'final' } }

describe('dsh acp: the file tools through the client\'s fs', () => {
  it('a client that offers reading only answers the reads; the write is made here, of the text it gave', async () => {
    const { editor, session, cwd } = await serve(calls({ tool: 'read', args: { path: 'notes.txt' } }, edit), { fs: { readTextFile: true, writeTextFile: false } })
    const notes = join(cwd, 'notes.txt')
    writeFileSync(notes, 'saved\n')
    editor.buffers.set(notes, 'unsaved draft\n')
    expect(await toolResults(session)).toEqual(['     1\tunsaved draft', 'edited notes.txt: line 1'])
    expect(editor.log).toEqual([`read ${notes}`, `read ${notes}`])
    expect(readFileSync(notes, 'utf8')).toBe('unsaved final\n')
  })

  it('a write the client refuses is the call\'s one-line refusal, nothing written anywhere; a NUL byte in what it reads is a binary file', async () => {
    const { editor, session, cwd } = await serve(calls(edit, { tool: 'read', args: { path: 'data.bin' } }), { fs: { readTextFile: true, writeTextFile: true } })
    const notes = join(cwd, 'notes.txt')
    writeFileSync(notes, 'a draft\n')
    writeFileSync(join(cwd, 'data.bin'), 'text on disk\n')
    editor.buffers.set(join(cwd, 'data.bin'), 'a\0b')
    editor.refuseWrites = 'read-only buffer'
    const [edited, read] = await toolResults(session)
    expect(edited).toBe('edit: notes.txt was not written: the ACP client answered: read-only buffer')
    expect(read).toBe('read: data.bin is a binary file (it holds NUL bytes); the file tools read text only')
    expect(readFileSync(notes, 'utf8')).toBe('a draft\n')
    expect(editor.buffers.has(notes)).toBe(false)
  })
})
