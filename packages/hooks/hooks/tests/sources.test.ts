/**
 * Where hooks are read from: the user's own files only unless asked; a project's
 * .claude/settings.json is a file that runs commands and is not read by default (a note
 * says it is there); unknown events and fields are one note each naming the file.
 */
import { mkdir, writeFile } from 'node:fs/promises'
import { join } from 'node:path'
import { afterEach, describe, expect, it } from 'vitest'
import { readHooks, readSources } from '@dsh/hooks'
import { cleanUp, tempDir } from './hooks-harness.js'

afterEach(cleanUp)

const SETTINGS = { hooks: { PreToolUse: [{ matcher: 'Bash', hooks: [{ type: 'command', command: 'exit 2' }] }] } }

async function project(file = 'settings.json', content: unknown = SETTINGS): Promise<{ cwd: string; home: string }> {
  const cwd = await tempDir()
  const home = await tempDir()
  await mkdir(join(cwd, '.claude'), { recursive: true })
  await writeFile(join(cwd, '.claude', file), typeof content === 'string' ? content : JSON.stringify(content))
  return { cwd, home }
}

describe('sources', () => {
  it('a project\'s .claude/settings.json and settings.local.json are not read by default; a note says how to run them', async () => {
    const { cwd, home } = await project()
    await writeFile(join(cwd, '.claude', 'settings.local.json'), JSON.stringify(SETTINGS))
    const notes: string[] = []
    expect(readSources(cwd, { claudeUserSettings: true, projectClaudeSettings: false }, (line) => notes.push(line), home)).toEqual([])
    expect(notes).toEqual([
      `${join(cwd, '.claude', 'settings.json')} has hooks, which are not run: a project's files run commands; set projectClaudeSettings: true on the hooks entry of your config to run them`,
      `${join(cwd, '.claude', 'settings.local.json')} has hooks, which are not run: a project's files run commands; set projectClaudeSettings: true on the hooks entry of your config to run them`,
    ])
  })

  it('with projectClaudeSettings the project\'s hooks are read, naming the file', async () => {
    const { cwd, home } = await project()
    const groups = readSources(cwd, { claudeUserSettings: false, projectClaudeSettings: true }, () => {}, home)
    expect(groups).toEqual([{ event: 'PreToolUse', matcher: 'Bash', pattern: expect.any(RegExp), hooks: [{ command: 'exit 2', timeoutMs: 60_000, from: join(cwd, '.claude', 'settings.json') }] }])
  })

  it('~/.claude/settings.json is read only when claudeUserSettings says so', async () => {
    const cwd = await tempDir()
    const home = await tempDir()
    await mkdir(join(home, '.claude'))
    await writeFile(join(home, '.claude', 'settings.json'), JSON.stringify(SETTINGS))
    expect(readSources(cwd, { claudeUserSettings: false, projectClaudeSettings: false }, () => {}, home)).toEqual([])
    expect(readSources(cwd, { claudeUserSettings: true, projectClaudeSettings: false }, () => {}, home)).toHaveLength(1)
  })

  it('Codex\'s hooks.json, the same shape: ~/.codex/hooks.json with codexUserHooks, ./.codex/hooks.json only with projectCodexHooks (else a note)', async () => {
    const cwd = await tempDir()
    const home = await tempDir()
    for (const dir of [join(home, '.codex'), join(cwd, '.codex')]) {
      await mkdir(dir)
      await writeFile(join(dir, 'hooks.json'), JSON.stringify(SETTINGS))
    }
    const notes: string[] = []
    expect(readSources(cwd, { claudeUserSettings: false, projectClaudeSettings: false }, (line) => notes.push(line), home)).toEqual([])
    expect(notes).toEqual([`${join(cwd, '.codex', 'hooks.json')} has hooks, which are not run: a project's files run commands; set projectCodexHooks: true on the hooks entry of your config to run them`])
    const user = readSources(cwd, { claudeUserSettings: false, projectClaudeSettings: false, codexUserHooks: true }, () => {}, home)
    expect(user.map((group) => group.hooks[0]!.from)).toEqual([join(home, '.codex', 'hooks.json')])
    const both = readSources(cwd, { claudeUserSettings: false, projectClaudeSettings: false, codexUserHooks: true, projectCodexHooks: true }, () => {}, home)
    expect(both.map((group) => group.hooks[0]!.from)).toEqual([join(home, '.codex', 'hooks.json'), join(cwd, '.codex', 'hooks.json')])
  })

  it('a malformed settings file is one note naming it, and nothing of it runs', async () => {
    const { cwd, home } = await project('settings.json', '{ "hooks": ')
    const notes: string[] = []
    expect(readSources(cwd, { claudeUserSettings: false, projectClaudeSettings: true }, (line) => notes.push(line), home)).toEqual([])
    expect(notes).toEqual([expect.stringMatching(new RegExp(`^${join(cwd, '.claude', 'settings.json')}: not valid JSON .*; its hooks are not run$`))])
  })
})

describe('the format', () => {
  it('unknown events, fields and hook types, an invalid matcher and a bad timeout are each one note naming the file', () => {
    const notes: string[] = []
    const groups = readHooks(
      {
        PreCompact: [],
        PreToolUse: [
          { matcher: '(', hooks: [{ type: 'command', command: 'true' }] },
          { matcher: 'Bash', extra: 1, hooks: [{ type: 'prompt', prompt: 'x' }, { type: 'command', command: 'true', timeout: -1, shell: 'zsh' }] },
        ],
      },
      'f.json',
      (line) => notes.push(line),
    )
    expect(groups).toEqual([{ event: 'PreToolUse', matcher: 'Bash', pattern: expect.any(RegExp), hooks: [{ command: 'true', timeoutMs: 60_000, from: 'f.json' }] }])
    expect(notes).toEqual([
      expect.stringMatching(/^f\.json: hook event "PreCompact" is not run by dsh/),
      expect.stringMatching(/^f\.json: hooks\.PreToolUse\[0\]: matcher "\(" is not a valid pattern .*; the group is left out$/),
      'f.json: hooks.PreToolUse[1]: field "extra" is not read by dsh',
      'f.json: hooks.PreToolUse[1].hooks[0]: hook type "prompt" is not run by dsh (only "command"); ignored',
      'f.json: hooks.PreToolUse[1].hooks[1]: field "shell" is not read by dsh',
      'f.json: hooks.PreToolUse[1].hooks[1]: timeout must be a positive number of seconds; 60 is used',
    ])
  })

  it('a timeout past a day is cut to a day with a note: past what a Node timer holds, it would fire at once and stop a guard before it decided', () => {
    const notes: string[] = []
    const groups = readHooks({ PreToolUse: [{ matcher: 'Bash', hooks: [{ type: 'command', command: 'exit 2', timeout: 30 * 86_400 }] }] }, 'f.json', (line) => notes.push(line))
    expect(groups[0]!.hooks).toEqual([{ command: 'exit 2', timeoutMs: 86_400_000, from: 'f.json' }])
    expect(notes).toEqual(['f.json: hooks.PreToolUse[0].hooks[0]: timeout 2592000 s is more than 86400 s (a day); 86400 is used'])
  })
})
