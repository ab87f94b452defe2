/**
 * write and edit on real files: what they change and what they refuse (all or nothing: a
 * refused call leaves the file as it was), the approval broker deciding every call with the
 * path as its subject, and the sandbox's writable set.
 */
import { existsSync } from 'node:fs'
import { readFile, symlink } from 'node:fs/promises'
import { join } from 'node:path'
import { afterEach, describe, expect, it } from 'vitest'
import { ApprovalService } from '@dsh/approvals'
import { call, cleanUp, files, runCalls, tempDir } from './files-harness.js'

afterEach(cleanUp)

const read = (dir: string, path: string) => readFile(join(dir, path), 'utf8')

describe('write', () => {
  it('creates a file with its missing directories, and replaces one', async () => {
    const dir = await tempDir()
    const { results } = await runCalls(dir, [
      { tool: 'write', args: { path: 'src/new/app.ts', content: 'a\nb\n' } },
      { tool: 'write', args: { path: 'src/new/app.ts', content: 'c\n' } },
    ])
    expect(results).toEqual([
      { text: 'created src/new/app.ts (2 lines, 4 bytes)', isError: false },
      { text: 'replaced src/new/app.ts (1 lines, 2 bytes)', isError: false },
    ])
    expect(await read(dir, 'src/new/app.ts')).toBe('c\n')
  })

  it('refuses a path outside the cwd, through a link, inside .git, or not in its one name, and writes nothing', async () => {
    const outside = await tempDir('dsh-outside-')
    const dir = await tempDir()
    await files(dir, { 'src/a.ts': 'a', '.git/config': '[core]' })
    await symlink(outside, join(dir, 'out'))
    await symlink('src', join(dir, 'lib'))
    const { results } = await runCalls(dir, [
      { tool: 'write', args: { path: '../escape.txt', content: 'x' } },
      { tool: 'write', args: { path: 'out/escape.txt', content: 'x' } },
      { tool: 'write', args: { path: '.git/hooks/pre-commit', content: 'x' } },
      { tool: 'write', args: { path: './src/a.ts', content: 'x' } },
      { tool: 'write', args: { path: join(dir, 'src/a.ts'), content: 'x' } },
      { tool: 'write', args: { path: 'lib/a.ts', content: 'x' } },
    ])
    expect(results.map((result) => result.isError)).toEqual([true, true, true, true, true, true])
    expect(results[0]!.text).toMatch(/^write: \.\.\/escape\.txt is outside the working directory/)
    expect(results[1]!.text).toMatch(/^write: out\/escape\.txt is outside the working directory .* \(through a symbolic link, to /)
    expect(results[2]!.text).toMatch(/^write: \.git\/hooks\/pre-commit is inside a \.git directory/)
    for (const result of results.slice(3)) expect(result.text).toContain('names the file src/a.ts: give the path as "src/a.ts"')
    expect(existsSync(join(outside, 'escape.txt'))).toBe(false)
    expect(existsSync(join(dir, '.git/hooks'))).toBe(false)
    expect(await read(dir, 'src/a.ts')).toBe('a')
  })
})

describe('edit', () => {
  it('replaces text that occurs once, every occurrence with replace_all, and several edits in order', async () => {
    const dir = await tempDir()
    await files(dir, { 'a.ts': 'const x = 1\nconst y = x\nlog(x)\n' })
    const { results } = await runCalls(dir, [
      { tool: 'edit', args: { path: 'a.ts', old_string: 'const y = x', new_string: 'const y = x + 1' } },
      { tool: 'edit', args: { path: 'a.ts', old_string: 'x', new_string: 'z', replace_all: true } },
      { tool: 'edit', args: { path: 'a.ts', edits: [{ old_string: 'const z = 1', new_string: 'let z = 1' }, { old_string: 'log(z)', new_string: 'print(z)' }] } },
    ])
    expect(results).toEqual([
      { text: 'edited a.ts: line 2', isError: false },
      { text: 'edited a.ts: 3 replacements from line 1', isError: false },
      { text: 'edited a.ts: edit 1: line 1; edit 2: line 3', isError: false },
    ])
    expect(await read(dir, 'a.ts')).toBe('let z = 1\nconst y = z + 1\nprint(z)\n')
  })

  it('refuses an old string that is missing or not unique, and several edits of which one fails, leaving the file as it was', async () => {
    const dir = await tempDir()
    const before = 'alpha\nbeta\nalpha\n'
    await files(dir, { 'a.txt': before, 'bin.dat': Buffer.from([0x61, 0x00, 0x62]) })
    const { results } = await runCalls(dir, [
      { tool: 'edit', args: { path: 'a.txt', old_string: 'gamma', new_string: 'delta' } },
      { tool: 'edit', args: { path: 'a.txt', old_string: 'alpha', new_string: 'omega' } },
      { tool: 'edit', args: { path: 'a.txt', edits: [{ old_string: 'beta', new_string: 'BETA' }, { old_string: 'gamma', new_string: 'x' }] } },
      { tool: 'edit', args: { path: 'bin.dat', old_string: 'a', new_string: 'b' } },
      { tool: 'edit', args: { path: 'missing.txt', old_string: 'a', new_string: 'b' } },
    ])
    expect(results).toEqual([
      { text: 'edit: old_string was not found in a.txt; nothing was changed', isError: true },
      { text: 'edit: old_string occurs 2 times in a.txt (lines 1, 3); include more of the surrounding text to make it unique, or set replace_all; nothing was changed', isError: true },
      { text: 'edit: edit 2: old_string was not found in a.txt (after the edits before it); nothing was changed', isError: true },
      { text: 'edit: bin.dat is a binary file (it holds NUL bytes); the file tools read text only', isError: true },
      { text: 'edit: missing.txt does not exist; create it with write', isError: true },
    ])
    expect(await read(dir, 'a.txt')).toBe(before)
  })
})

describe('the approval broker decides every write and edit, with the path as subject', () => {
  const broker = (config: Partial<ApprovalService.Config>) => async (harness: { plugin: (plugin: unknown, config: unknown) => Promise<void> }) => harness.plugin(ApprovalService, config)

  it('with nobody to ask and the default reject (dsh run --permission reject), an edit and a write are refused and nothing changes', async () => {
    const dir = await tempDir()
    await files(dir, { 'src/a.ts': 'old' })
    const { results, agent } = await runCalls(
      dir,
      [
        { tool: 'edit', args: { path: 'src/a.ts', old_string: 'old', new_string: 'new' } },
        { tool: 'write', args: { path: 'src/b.ts', content: 'x' } },
        { tool: 'read', args: { path: 'src/a.ts' } },
      ],
      { before: broker({}) },
    )
    expect(results[0]).toMatchObject({ isError: true })
    expect(results[0]!.text).toMatch(/^edit was not run: permission denied by /)
    expect(results[1]!.text).toMatch(/^write was not run: permission denied by /)
    // A read is no side effect: the broker never sees it.
    expect(results[2]).toEqual({ text: '     1\told', isError: false })
    expect(await read(dir, 'src/a.ts')).toBe('old')
    expect(existsSync(join(dir, 'src/b.ts'))).toBe(false)
    const decisions = agent.session.events().flatMap((event) => (event.type === 'tool/result' && event.permission ? [event.permission.decision] : []))
    expect(decisions).toEqual(['reject', 'reject'])
  })

  it('a rule edit(src/**) allows an edit under src/ and no other; deny edit(src/**) refuses one under an allowing default', async () => {
    const dir = await tempDir()
    await files(dir, { 'src/deep/a.ts': 'old', 'b.ts': 'old' })
    const allowed = await runCalls(
      dir,
      [
        { tool: 'edit', args: { path: 'src/deep/a.ts', old_string: 'old', new_string: 'new' } },
        { tool: 'edit', args: { path: 'b.ts', old_string: 'old', new_string: 'new' } },
      ],
      { before: broker({ allow: ['edit(src/**)'] }) },
    )
    expect(allowed.results[0]).toEqual({ text: 'edited src/deep/a.ts: line 1', isError: false })
    expect(allowed.results[1]!.isError).toBe(true)
    const rules = allowed.agent.session.events().flatMap((event) => (event.type === 'tool/result' && event.permission ? [event.permission.rule] : []))
    expect(rules[0]).toContain('edit(src/**)')
    expect(await read(dir, 'src/deep/a.ts')).toBe('new')
    expect(await read(dir, 'b.ts')).toBe('old')

    const denied = await runCalls(dir, [{ tool: 'edit', args: { path: 'src/deep/a.ts', old_string: 'new', new_string: 'newer' } }], { before: broker({ default: 'allow', deny: ['edit(src/**)'] }) })
    expect(denied.results[0]!.text).toMatch(/^edit was not run: permission denied by the policy: the rule edit\(src\/\*\*\) \(config\) denies it/)
    expect(await read(dir, 'src/deep/a.ts')).toBe('new')
  })
})

describe('rules name the tool', () => {
  it('an edit(...) rule does not cover write; *(src/**) covers both', async () => {
    const dir = await tempDir()
    await files(dir, { 'src/a.ts': 'old' })
    const calls = [
      { tool: 'write', args: { path: 'src/b.ts', content: 'x' } },
      { tool: 'edit', args: { path: 'src/a.ts', old_string: 'old', new_string: 'new' } },
    ]
    const editOnly = await runCalls(dir, calls, { before: async (harness) => harness.plugin(ApprovalService, { default: 'allow', deny: ['edit(src/**)'] }) })
    expect(editOnly.results.map((result) => result.isError)).toEqual([false, true])
    const both = await runCalls(dir, [{ tool: 'write', args: { path: 'src/c.ts', content: 'x' } }, calls[1]!], { before: async (harness) => harness.plugin(ApprovalService, { default: 'allow', deny: ['*(src/**)'] }) })
    expect(both.results.map((result) => result.isError)).toEqual([true, true])
    expect(existsSync(join(dir, 'src/c.ts'))).toBe(false)
    expect(await read(dir, 'src/a.ts')).toBe('old')
  })
})

describe('under the sandbox header', () => {
  it('writes only in the cwd: an allowed directory outside it is readable but refused for writing', async () => {
    const shared = await tempDir('dsh-shared-')
    await files(shared, { 'notes.md': 'shared' })
    const dir = await tempDir()
    const calls = [
      { tool: 'write', args: { path: join(shared, 'out.md'), content: 'x' } },
      { tool: 'edit', args: { path: join(shared, 'notes.md'), old_string: 'shared', new_string: 'changed' } },
      { tool: 'read', args: { path: join(shared, 'notes.md') } },
      { tool: 'write', args: { path: 'inside.md', content: 'x' } },
    ]
    const sandboxed = await runCalls(dir, calls, { config: { allowedDirectories: [shared] }, sandbox: { network: false } })
    expect(sandboxed.results[0]!.text).toBe(`write: ${join(shared, 'out.md')} is outside the working directory ${dir}: this agent runs in a sandbox, where only its working directory is writable`)
    expect(sandboxed.results[1]!.isError).toBe(true)
    expect(sandboxed.results[2]).toEqual({ text: '     1\tshared', isError: false })
    expect(sandboxed.results[3]).toEqual({ text: 'created inside.md (1 lines, 1 bytes)', isError: false })
    expect(existsSync(join(shared, 'out.md'))).toBe(false)
    expect(await read(shared, 'notes.md')).toBe('shared')
    // The same calls without the sandbox: the allowed directory is writable.
    const open = await runCalls(dir, calls.slice(0, 2), { config: { allowedDirectories: [shared] } })
    expect(open.results.map((result) => result.isError)).toEqual([false, false])
    expect(await read(shared, 'notes.md')).toBe('changed')
  })
})
