/**
 * read, ls and glob on real files: what they show, how they are bounded, and every path
 * they refuse (outside the cwd by `..`, by an absolute path or through a link; a link loop;
 * a file too large, binary, or not a file), each one error line and the run going on.
 */
import { open, symlink, utimes } from 'node:fs/promises'
import { join } from 'node:path'
import { afterEach, describe, expect, it } from 'vitest'
import { call, cleanUp, files, runCalls, tempDir } from './files-harness.js'

afterEach(cleanUp)

describe('read', () => {
  it('numbers the lines of a file in the cwd, and reads a range with offset and limit, saying what is left', async () => {
    const dir = await tempDir()
    await files(dir, { 'src/app.ts': 'one\ntwo\nthree\nfour\n' })
    expect(await call(dir, 'read', { path: 'src/app.ts' })).toEqual({ text: '     1\tone\n     2\ttwo\n     3\tthree\n     4\tfour', isError: false })
    expect(await call(dir, 'read', { path: 'src/app.ts', offset: 2, limit: 2 })).toEqual({ text: '     2\ttwo\n     3\tthree\n(lines 2-3 of 4; read on with offset 4)', isError: false })
    expect(await call(dir, 'read', { path: join(dir, 'src/app.ts'), offset: 9 })).toEqual({ text: 'read: offset 9 is past the end of src/app.ts, which has 4 lines', isError: true })
  })

  it('bounds what it returns: the default number of lines, long lines cut, the whole result cut', async () => {
    const dir = await tempDir()
    await files(dir, { 'many.txt': Array.from({ length: 50 }, (_, i) => `line ${i + 1}`).join('\n'), 'wide.txt': 'x'.repeat(100) })
    const many = await call(dir, 'read', { path: 'many.txt' }, { config: { readDefaultLines: 10 } })
    expect(many.text.split('\n')).toHaveLength(11)
    expect(many.text).toMatch(/\(lines 1-10 of 50; read on with offset 11\)$/)
    expect((await call(dir, 'read', { path: 'wide.txt' }, { config: { maxLineChars: 20 } })).text).toBe(`     1\t${'x'.repeat(20)}… (line cut at 20 characters)`)
    const cut = await call(dir, 'read', { path: 'many.txt' }, { config: { maxOutputChars: 300 } })
    expect(cut.text.length).toBeLessThan(400)
    expect(cut.text).toMatch(/… \(output cut at \d+ of \d+ characters; read a smaller range with offset and limit\)$/)
  })

  it('refuses paths that leave the cwd, by .. , by an absolute path or through a link, and reads nothing there', async () => {
    const outside = await tempDir('dsh-outside-')
    await files(outside, { 'secret.txt': 'the secret' })
    const dir = await tempDir()
    await files(dir, { 'inside.txt': 'fine' })
    await symlink(join(outside, 'secret.txt'), join(dir, 'link.txt'))
    await symlink(outside, join(dir, 'linkdir'))
    const { results } = await runCalls(dir, [
      { tool: 'read', args: { path: `../${outside.split('/').pop()}/secret.txt` } },
      { tool: 'read', args: { path: join(outside, 'secret.txt') } },
      { tool: 'read', args: { path: 'link.txt' } },
      { tool: 'read', args: { path: 'linkdir/secret.txt' } },
      { tool: 'read', args: { path: 'inside.txt' } },
    ])
    for (const result of results.slice(0, 4)) {
      expect(result.isError).toBe(true)
      expect(result.text).toMatch(/^read: .* is outside the working directory /)
      expect(result.text).not.toContain('the secret')
    }
    expect(results[2]!.text).toContain(`through a symbolic link, to ${join(outside, 'secret.txt')}`)
    // The run went on: the next call in the same turn read its file.
    expect(results[4]).toEqual({ text: '     1\tfine', isError: false })
  })

  it('reads a directory config allows beyond the cwd', async () => {
    const shared = await tempDir('dsh-shared-')
    await files(shared, { 'notes.md': 'shared notes' })
    const dir = await tempDir()
    expect(await call(dir, 'read', { path: join(shared, 'notes.md') }, { config: { allowedDirectories: [shared] } })).toEqual({ text: '     1\tshared notes', isError: false })
  })

  it('refuses a link loop, a 2 GB file by its size without reading it, a binary file and a directory, each in one line', async () => {
    const dir = await tempDir()
    await symlink('loop-b', join(dir, 'loop-a'))
    await symlink('loop-a', join(dir, 'loop-b'))
    // Sparse: 2 GiB by its size, nothing on disk. Reading it would take seconds and the memory.
    const huge = await open(join(dir, 'huge.log'), 'w')
    await huge.truncate(2 * 1024 ** 3)
    await huge.close()
    await files(dir, { 'image.png': Buffer.from([0x89, 0x50, 0x4e, 0x47, 0x00, 0x01]), 'sub/x.txt': 'x' })
    const { results } = await runCalls(dir, [
      { tool: 'read', args: { path: 'loop-a' } },
      { tool: 'read', args: { path: 'huge.log' } },
      { tool: 'read', args: { path: 'image.png' } },
      { tool: 'read', args: { path: 'sub' } },
    ])
    expect(results).toEqual([
      { text: 'read: loop-a: a symbolic link loop (or too many links to follow)', isError: true },
      { text: 'read: huge.log is 2147483648 bytes, more than the 10485760 the file tools read; search it with grep, or look at parts with bash (head, tail, sed -n)', isError: true },
      { text: 'read: image.png is a binary file (it holds NUL bytes); the file tools read text only', isError: true },
      { text: 'read: sub is a directory (list it with ls)', isError: true },
    ])
  })
})

describe('ls', () => {
  it('lists entries by name, directories with / and links with @, bounded with a count of the rest', async () => {
    const dir = await tempDir()
    await files(dir, { 'b.txt': '', 'a.txt': '', 'src/x.ts': '', 'c.txt': '', 'd.txt': '' })
    await symlink('a.txt', join(dir, 'alias'))
    expect(await call(dir, 'ls', {})).toEqual({ text: '.:\na.txt\nalias@\nb.txt\nc.txt\nd.txt\nsrc/', isError: false })
    expect(await call(dir, 'ls', { path: 'src' })).toEqual({ text: 'src:\nx.ts', isError: false })
    expect(await call(dir, 'ls', {}, { config: { maxResults: 2 } })).toEqual({ text: '.:\na.txt\nalias@\n… and 4 more entries (6 in all); narrow it with glob', isError: false })
    expect(await call(dir, 'ls', { path: 'a.txt' })).toEqual({ text: 'ls: a.txt is not a directory (read it with read)', isError: true })
    expect((await call(dir, 'ls', { path: '..' })).text).toMatch(/^ls: \.\. is outside the working directory/)
  })
})

describe('glob', () => {
  it('finds files by a glob, newest first, without descending into .git or node_modules', async () => {
    const dir = await tempDir()
    await files(dir, { 'src/old.ts': '', 'src/deep/new.ts': '', 'src/readme.md': '', 'top.ts': '', 'node_modules/pkg/index.ts': '', '.git/hooks/x.ts': '' })
    await utimes(join(dir, 'src/old.ts'), 1_000, 1_000)
    await utimes(join(dir, 'top.ts'), 2_000, 2_000)
    await utimes(join(dir, 'src/deep/new.ts'), 3_000, 3_000)
    expect(await call(dir, 'glob', { pattern: '**/*.ts' })).toEqual({ text: 'src/deep/new.ts\ntop.ts\nsrc/old.ts', isError: false })
    expect(await call(dir, 'glob', { pattern: '*.ts' })).toEqual({ text: 'top.ts', isError: false })
    expect(await call(dir, 'glob', { pattern: '**/*.{md,ts}', path: 'src' })).toEqual({ text: 'src/readme.md\nsrc/deep/new.ts\nsrc/old.ts', isError: false })
    expect(await call(dir, 'glob', { pattern: '**/*.py' })).toEqual({ text: 'no files match **/*.py under .', isError: false })
  })

  it('a glob matching more files than the bound returns the bound and says how many more; a walk past its bound stops and says so', async () => {
    const dir = await tempDir()
    await files(dir, Object.fromEntries(Array.from({ length: 300 }, (_, i) => [`gen/f${String(i).padStart(3, '0')}.txt`, ''])))
    const bounded = await call(dir, 'glob', { pattern: '**/*' }, { config: { maxResults: 5 } })
    expect(bounded.isError).toBe(false)
    const lines = bounded.text.split('\n')
    expect(lines).toHaveLength(6)
    expect(lines[5]).toBe('(295 more matches not shown (the 5 newest are); narrow the pattern or the path)')
    const walked = await call(dir, 'glob', { pattern: '**/*' }, { config: { maxWalkEntries: 50 } })
    expect(walked.text).toContain('(the walk stopped after 50 entries, so there may be more; narrow the path)')
    expect(walked.text.split('\n').filter((line) => line.startsWith('gen/'))).toHaveLength(49)
  })

  it('refuses a path outside the cwd', async () => {
    const dir = await tempDir()
    expect((await call(dir, 'glob', { pattern: '*', path: '/etc' })).text).toMatch(/^glob: \/etc is outside the working directory/)
  })
})
