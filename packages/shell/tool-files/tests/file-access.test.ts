/**
 * The file access seam: a router on ctx.files sends an agent's read, write and edit to
 * another FileAccess (as dsh acp does with its client's fs), paths still confined here
 * first and writes still decided by the approval broker before the access is asked; an
 * agent no router picks, and glob, grep and ls, stay on the local file system.
 */
import { readFile } from 'node:fs/promises'
import { join } from 'node:path'
import { afterEach, describe, expect, it } from 'vitest'
import { ApprovalService } from '@dsh/approvals'
import { acceptText, checkReadable, type FileAccess } from '@dsh/tool-files'
import { cleanUp, files, runCalls, tempDir } from './files-harness.js'

afterEach(cleanUp)

/** An editor's buffers: what it holds for a file wins over the disk; every request is logged. */
function editorBuffers(buffers: Map<string, string>, log: string[]): FileAccess {
  return {
    name: 'the test editor',
    async readText(file, maxFileBytes) {
      log.push(`read ${file.name}`)
      await checkReadable(file.real, file.name, maxFileBytes)
      return acceptText(buffers.get(file.real) ?? (await readFile(file.real, 'utf8')), file.name, maxFileBytes)
    },
    async writeText(file, content) {
      log.push(`write ${file.name}`)
      buffers.set(file.real, content)
    },
  }
}

describe('ctx.files.addRouter', () => {
  it('reads and edits a routed agent\'s files through its access (the unsaved text), leaving the disk alone; glob still looks at the disk', async () => {
    const dir = await tempDir()
    await files(dir, { 'src/a.ts': 'on disk\n' })
    const buffers = new Map([[join(dir, 'src/a.ts'), 'unsaved one\n']])
    const log: string[] = []
    const { results } = await runCalls(
      dir,
      [
        { tool: 'read', args: { path: 'src/a.ts' } },
        { tool: 'edit', args: { path: 'src/a.ts', old_string: 'one', new_string: 'two' } },
        { tool: 'write', args: { path: 'src/b.ts', content: 'new\n' } },
        { tool: 'glob', args: { pattern: '**/*.ts' } },
      ],
      { after: (harness) => harness.ctx.files.addRouter(() => editorBuffers(buffers, log)) },
    )
    expect(results.map((result) => result.text)).toEqual(['     1\tunsaved one', 'edited src/a.ts: line 1', 'created src/b.ts (1 lines, 4 bytes)', 'src/a.ts'])
    expect(log).toEqual(['read src/a.ts', 'read src/a.ts', 'write src/a.ts', 'write src/b.ts'])
    expect(buffers.get(join(dir, 'src/a.ts'))).toBe('unsaved two\n')
    expect(await readFile(join(dir, 'src/a.ts'), 'utf8')).toBe('on disk\n')
  })

  it('an agent the router does not pick reads and writes the disk', async () => {
    const dir = await tempDir()
    await files(dir, { 'a.txt': 'disk\n' })
    const log: string[] = []
    const { results } = await runCalls(dir, [{ tool: 'edit', args: { path: 'a.txt', old_string: 'disk', new_string: 'edited' } }], {
      after: (harness) => harness.ctx.files.addRouter((agent) => (agent.id === 'someone-else' ? editorBuffers(new Map(), log) : undefined)),
    })
    expect(results[0]!.text).toBe('edited a.txt: line 1')
    expect(await readFile(join(dir, 'a.txt'), 'utf8')).toBe('edited\n')
    expect(log).toEqual([])
  })

  it('asks no access for a write the broker refuses, nor for a path outside the working directory', async () => {
    const dir = await tempDir()
    await files(dir, { 'a.txt': 'disk\n' })
    const log: string[] = []
    const { results } = await runCalls(
      dir,
      [
        { tool: 'write', args: { path: 'a.txt', content: 'x' } },
        { tool: 'read', args: { path: '../outside.txt' } },
      ],
      {
        before: async (harness) => harness.plugin(ApprovalService, { default: 'reject' }),
        after: (harness) => harness.ctx.files.addRouter(() => editorBuffers(new Map(), log)),
      },
    )
    expect(results[0]!.text).toMatch(/^write was not run: permission denied by /)
    expect(results[1]!.text).toMatch(/^read: \.\.\/outside\.txt is outside the working directory /)
    expect(log).toEqual([])
  })
})
