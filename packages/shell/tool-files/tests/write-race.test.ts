/**
 * A write judged, then raced: the path was confined (and, in a host, asked about) before
 * the file is written, and meanwhile a sandboxed command or an ACP agent swaps a
 * directory of it for a symbolic link to one outside. The write refuses, and nothing
 * lands outside: not the file, not its temporary, not a directory.
 */
import { existsSync, mkdirSync, readdirSync, renameSync, symlinkSync } from 'node:fs'
import { join } from 'node:path'
import { afterEach, describe, expect, it } from 'vitest'
import { confinementOfDirectory, LOCAL_FILE_ACCESS, resolveWriteTarget } from '@dsh/tool-files/access'
import { cleanUp, tempDir } from './files-harness.js'

afterEach(cleanUp)

async function judged(root: string, path: string) {
  return resolveWriteTarget(await confinementOfDirectory(root), path)
}

describe('replacing a file whose directory changed after it was judged', () => {
  it('refuses when an existing directory was swapped for a link to one outside, and writes nothing there', async () => {
    const root = await tempDir()
    const outside = await tempDir()
    mkdirSync(join(root, 'sub'))
    const file = await judged(root, 'sub/raced.txt')
    expect(file.name).toBe(join('sub', 'raced.txt'))
    renameSync(join(root, 'sub'), join(root, 'sub-moved'))
    symlinkSync(outside, join(root, 'sub'))
    await expect(LOCAL_FILE_ACCESS.writeText(file, 'written\n', new AbortController().signal)).rejects.toMatchObject({ code: 'OUTSIDE', message: expect.stringContaining('changed while the write waited') })
    expect(readdirSync(outside)).toEqual([])
  })

  it('refuses when a missing directory it would have made appeared as a link to one outside, and writes nothing there', async () => {
    const root = await tempDir()
    const outside = await tempDir()
    const file = await judged(root, 'newdir/deeper/raced.txt')
    symlinkSync(outside, join(root, 'newdir'))
    await expect(LOCAL_FILE_ACCESS.writeText(file, 'written\n', new AbortController().signal)).rejects.toMatchObject({ code: 'OUTSIDE' })
    expect(readdirSync(outside)).toEqual([])
  })

  it('still makes the missing directories of an unraced write', async () => {
    const root = await tempDir()
    const file = await judged(root, 'a/b/c.txt')
    await LOCAL_FILE_ACCESS.writeText(file, 'made\n', new AbortController().signal)
    expect(existsSync(join(root, 'a', 'b', 'c.txt'))).toBe(true)
    expect(readdirSync(join(root, 'a', 'b'))).toEqual(['c.txt'])
  })
})
