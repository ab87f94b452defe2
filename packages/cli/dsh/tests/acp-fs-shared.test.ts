/**
 * An ACP child in shared-workspace mode reads and writes through its client, through the
 * built dsh: `dsh run` delegates to a `dsh acp` child over the `acp` provider with
 * `sharedWorkspace: true`, which offers the child its fs; the child's `read` and `edit`
 * arrive as `fs/read_text_file` and `fs/write_text_file` at the parent, which confines
 * them to the child's working directory as the file tools confine theirs (its frame limit
 * bounds a read: the proof that the file came through the parent) and puts the write to
 * the root's broker. With `--permission reject` at the root the edit is refused and the
 * file is unchanged; a path outside the working directory is refused.
 */
import { readdirSync, readFileSync, realpathSync, writeFileSync } from 'node:fs'
import { join } from 'node:path'
import { describe, expect, it } from 'vitest'
import { dshBin, runDsh, tempDir } from './cli.js'

/** A directory with the notes the child edits, a file larger than the parent's frame limit, and the composition and scripts. */
function project(): { dir: string; outside: string; config: string; script: string } {
  const dir = realpathSync(tempDir('dsh-acp-fs-shared-'))
  const outside = join(realpathSync(tempDir('dsh-acp-fs-outside-')), 'secret.txt')
  writeFileSync(outside, 'secret\n')
  writeFileSync(join(dir, 'notes.txt'), 'a draft\n')
  writeFileSync(join(dir, 'big.txt'), `${'x'.repeat(99)}\n`.repeat(60))
  const child = join(dir, '.child.yml')
  writeFileSync(child, [
    '- when: { prompt: "notes" }',
    '  reply:',
    '    - call: { tool: read, args: { path: notes.txt } }',
    '    - call: { tool: read, args: { path: big.txt } }',
    `    - call: { tool: read, args: { path: ${JSON.stringify(outside)} } }`,
    '    - call: { tool: edit, args: { path: notes.txt, old_string: draft, new_string: final } }',
    '    - text: "child done: {{last_tool_result}}"',
  ].join('\n'))
  const config = join(dir, '.dsh-test.yml')
  writeFileSync(config, [
    '- id: subagent-acp',
    '  name: "@dsh/subagent-acp"',
    '  config:',
    '    providerName: acp',
    `    command: ${JSON.stringify(process.execPath)}`,
    `    args: ${JSON.stringify([dshBin, 'acp', '--model', `scripted:${child}`, '--session-dir', join(dir, '.sessions')])}`,
    '    sharedWorkspace: true',
    // The parent reads at most this much for the child in one fs/read_text_file: big.txt is over it.
    '    maxFrameBytes: 4096',
    '- id: tool-subagent-acp',
    '  name: "@dsh/tool-subagent"',
    '  config: { provider: acp, toolName: subagent_acp }',
  ].join('\n'))
  const script = join(dir, '.script.yml')
  writeFileSync(script, ['- when: { depth: 0 }', '  reply:', '    - call: { tool: subagent_acp, args: { description: notes, prompt: "work on the notes" } }', '    - text: "root: {{last_tool_result}}"'].join('\n'))
  return { dir, outside, config, script }
}

/** The child's session events (the one with a parent). */
function childEvents(dir: string): Array<Record<string, any>> {
  const sessions = join(dir, '.sessions')
  for (const name of readdirSync(sessions).filter((file) => file.endsWith('.jsonl'))) {
    const [head, ...rest] = readFileSync(join(sessions, name), 'utf8').trim().split('\n').map((line) => JSON.parse(line) as Record<string, any>)
    if (head!.header.parentSession !== undefined) return rest
  }
  throw new Error('no child session')
}

/** The text of each of the child's tool results, in order: what its model was given. */
function childResults(dir: string): string[] {
  return childEvents(dir).filter((event) => event.type === 'tool/result').map((event) => (event.result.content as Array<{ text: string }>).map((block) => block.text).join(''))
}

/** Who decided the child's side effects, as its session records them. */
function childPermissions(dir: string): Array<{ decision: string; by: string }> {
  return childEvents(dir).flatMap((event) => (event.type === 'tool/result' && event.permission ? [{ decision: event.permission.decision, by: event.permission.by }] : []))
}

describe('an ACP child in shared-workspace mode, through dsh run', () => {
  it('reads and edits the parent\'s tree through its client: the parent confines and bounds the read, the root\'s broker decides the write', async () => {
    const { dir, outside, config, script } = project()
    const result = await runDsh(['run', '--config', config, '--model', `scripted:${script}`, '--session-dir', join(dir, '.sessions'), '--permission', 'allow', 'go'], { cwd: dir, timeoutMs: 60_000 })
    expect(result.stderr).not.toMatch(/error/i)
    expect(result.code).toBe(0)
    const [notes, big, secret, edit] = childResults(dir)
    expect(notes).toBe('     1\ta draft')
    // Only the parent holds a read to 4096 bytes: the child's own tools read 10 MB.
    expect(big).toBe('read: big.txt could not be read: the ACP client answered: Invalid params: big.txt is 6000 bytes, more than the 4096 the file tools read; search it with grep, or look at parts with bash (head, tail, sed -n)')
    expect(secret).toMatch(/^read: .*secret\.txt is outside the working directory /)
    expect(edit).toBe('edited notes.txt: line 1')
    expect(readFileSync(join(dir, 'notes.txt'), 'utf8')).toBe('a final\n')
    expect(readFileSync(outside, 'utf8')).toBe('secret\n')
    expect(result.stdout).toContain('child done: edited notes.txt: line 1')
    // The child's edit was decided at the root (the child records who decided); its write through the parent used that decision.
    expect(childPermissions(dir)).toEqual([{ decision: 'allow-once', by: 'dsh run --permission allow (through the ACP client)' }])
  })

  it('with --permission reject at the root the child\'s edit is refused and the file is unchanged', async () => {
    const { dir, config, script } = project()
    const result = await runDsh(['run', '--config', config, '--model', `scripted:${script}`, '--session-dir', join(dir, '.sessions'), '--permission', 'reject', 'go'], { cwd: dir, timeoutMs: 60_000 })
    expect(result.code).toBe(0)
    const [notes, , , edit] = childResults(dir)
    expect(notes).toBe('     1\ta draft')
    expect(edit).toMatch(/^edit was not run: permission denied by /)
    expect(readFileSync(join(dir, 'notes.txt'), 'utf8')).toBe('a draft\n')
    expect(childPermissions(dir)).toEqual([{ decision: 'reject', by: 'dsh run --permission reject (through the ACP client)' }])
  })
})
