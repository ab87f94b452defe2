import { execFileSync } from 'node:child_process'
import { chmodSync, mkdirSync, mkdtempSync, rmSync, symlinkSync, writeFileSync } from 'node:fs'
import { tmpdir } from 'node:os'
import { join } from 'node:path'
import { fileURLToPath } from 'node:url'
import { afterEach, beforeEach, describe, expect, it } from 'vitest'
import { Context } from 'cordis'
import { loadSkills, MAX_SKILL_BYTES, SkillError, SkillsService, skillFiles } from '../src/index.js'

let root: string
let cwd: string
let home: string
beforeEach(() => {
  root = mkdtempSync(join(tmpdir(), 'dsh-skills-'))
  cwd = join(root, 'project')
  home = join(root, 'home')
  mkdirSync(cwd)
  mkdirSync(home)
})
afterEach(() => rmSync(root, { recursive: true, force: true }))

const projectSkills = () => join(cwd, '.dsh', 'skills')
const userSkills = () => join(home, 'skills')
/** `dir/<folder>/SKILL.md` with `text`; returns the file. */
function skill(dir: string, folder: string, text: string): string {
  mkdirSync(join(dir, folder), { recursive: true })
  const file = join(dir, folder, 'SKILL.md')
  writeFileSync(file, text)
  return file
}
const load = (more: Parameters<typeof loadSkills>[0] = {}) => loadSkills({ cwd, home, ...more })

const NOBODY = 65534
const built = fileURLToPath(new URL('../dist/index.js', import.meta.url))
/**
 * loadSkills({ cwd, home }) in a Node process of the user `nobody`: root reads everything, so
 * a test of what a user may not read runs as one who may not. The package is loaded as built
 * (dist/, like the CLI's tests) while the process is still root, so a checkout nobody cannot
 * read (a private home) does not matter; then it drops its ids and throws, failing the test,
 * unless every one is nobody's. Returns the refusal's code and message.
 */
function refusalAsNobody(): { code: string; message: string } {
  const script = `
    const { loadSkills, SkillError } = await import(${JSON.stringify(built)})
    process.setgroups([])
    process.setgid(${NOBODY})
    process.setuid(${NOBODY})
    const ids = [process.getuid(), process.geteuid(), process.getgid(), process.getegid(), ...process.getgroups()]
    if (ids.some((id) => id !== ${NOBODY})) throw new Error('could not drop to nobody: ids are ' + ids.join(','))
    try {
      loadSkills(${JSON.stringify({ cwd, home })})
    } catch (error) {
      if (!(error instanceof SkillError)) throw error
      process.stdout.write(JSON.stringify({ code: error.code, message: error.message }))
      process.exit(0)
    }
    throw new Error('expected a SkillError')
  `
  return JSON.parse(execFileSync(process.execPath, ['--input-type=module', '-e', script], { encoding: 'utf8', env: { PATH: process.env.PATH ?? '/usr/bin:/bin' } })) as { code: string; message: string }
}

function refusal(run: () => unknown): SkillError {
  try {
    run()
  } catch (error) {
    expect(error).toBeInstanceOf(SkillError)
    expect((error as Error).message).not.toMatch(/\n/)
    return error as SkillError
  }
  throw new Error('expected a SkillError')
}

const RELEASE_NOTES = `---
name: release-notes
description: Writes release notes from the commits
  since the last tag.
license: MIT
metadata: { author: team }
---
# Release notes

Read template.md and fill it in.
`

describe('loading skills', () => {
  it('reads a SKILL.md folder: name, description folded to one line, the body as its instructions; the format\'s other fields are quiet', () => {
    const file = skill(projectSkills(), 'release-notes', RELEASE_NOTES)
    const { skills, notes, warnings } = load()
    expect(notes).toEqual([])
    expect(warnings).toEqual([])
    expect(skills).toEqual([
      {
        name: 'release-notes',
        description: 'Writes release notes from the commits since the last tag.',
        dir: join(projectSkills(), 'release-notes'),
        file,
        instructions: '# Release notes\n\nRead template.md and fill it in.',
        origin: 'project',
        hash: expect.stringMatching(/^[0-9a-f]{16}$/),
      },
    ])
  })

  it('finds project, Claude Code (on request) and user skills, sorted by name; the user\'s own skill wins a clash with a project\'s, with a warning naming both files', () => {
    const theirs = skill(projectSkills(), 'triage', '---\nname: triage\ndescription: Sorts issues.\n---\nSort.\n')
    const mine = skill(userSkills(), 'triage', '---\nname: triage\ndescription: My triage.\n---\nMine.\n')
    skill(userSkills(), 'bisect', '---\nname: bisect\ndescription: Finds a bad commit.\n---\nBisect.\n')
    skill(join(cwd, '.claude', 'skills'), 'pdf', '---\nname: pdf\ndescription: Reads PDFs.\n---\nPDF.\n')
    const claudeLint = skill(join(cwd, '.claude', 'skills'), 'lint', '---\nname: lint\ndescription: Theirs.\n---\nLint.\n')
    const projectLint = skill(projectSkills(), 'lint', '---\nname: lint\ndescription: Lints.\n---\nLint.\n')
    // A folder without SKILL.md and a loose file are not skills.
    mkdirSync(join(projectSkills(), 'notes'))
    writeFileSync(join(projectSkills(), 'README.md'), 'about our skills')
    const clash = `${theirs}: warning: skill "triage" is also your own ${mine}; a project's skill may not replace yours, so yours is used (rename one of them to have both)`
    const plain = load()
    expect(plain.skills.map((found) => [found.name, found.origin, found.file])).toEqual([['bisect', 'user', join(userSkills(), 'bisect', 'SKILL.md')], ['lint', 'project', projectLint], ['triage', 'user', mine]])
    expect(plain.warnings).toEqual([clash])
    const { skills, notes, warnings } = load({ claudeCode: true })
    expect(skills.map((found) => [found.name, found.origin])).toEqual([['bisect', 'user'], ['lint', 'project'], ['pdf', 'claude-code'], ['triage', 'user']])
    expect(warnings).toEqual([clash])
    // Between the project's own directories the first wins, with a note.
    expect(notes).toEqual([clash, `${claudeLint}: note: skill "lint" is shadowed by ${projectLint} (project skills win)`])
    expect(load({ project: false, user: false, claudeCode: true }).skills.map((found) => found.name)).toEqual(['lint', 'pdf'])
    // Without the user's directory the project's skill is used, unwarned.
    expect(load({ user: false }).skills.find((found) => found.name === 'triage')?.file).toBe(theirs)
    expect(load({ user: false }).warnings).toEqual([])
  })

  it('does not apply allowed-tools, whoever wrote the skill: a warning naming the file and line says what to change', () => {
    const file = skill(projectSkills(), 'deploy', '---\nname: deploy\ndescription: Deploys.\nallowed-tools: Bash(git push:*) Read\n---\nPush.\n')
    const user = skill(userSkills(), 'mine', '---\nname: mine\ndescription: Mine.\nallowed-tools: Bash\n---\n')
    const { skills, warnings, notes } = load()
    expect(skills.map((found) => found.name)).toEqual(['deploy', 'mine'])
    const warning = (at: string, name: string) =>
      `${at}:4: skill "${name}": allowed-tools is not applied, since a skill adds instructions and never grants tools or permissions; to let those tools run unasked, add rules to allow in the approvals entry of your own config`
    expect(warnings).toEqual([warning(user, 'mine'), warning(file, 'deploy')])
    expect(notes).toEqual(warnings)
    // Nothing of the field is kept on the skill.
    expect(JSON.stringify(skills)).not.toContain('git push')
  })

  it('notes a field dsh does not use and a name that is not its folder\'s, and loads the skill', () => {
    const file = skill(projectSkills(), 'folder', '---\nname: other\ndescription: D.\nmodel: sonnet\n---\n')
    const { skills, notes } = load()
    expect(skills.map((found) => found.name)).toEqual(['other'])
    expect(notes).toEqual([`${file}:4: note: field "model" is not used by dsh`, `${file}:2: note: skill "other" is in a folder named "folder"; the format names the folder after the skill`])
  })

  it.each([
    ['no front matter', '# Just a body\n', 1, 'a skill starts with YAML front matter: a line "---", the fields, another "---", then the skill\'s instructions', 'SYNTAX'],
    ['unclosed front matter', '---\nname: x\n', 1, 'the front matter opened here is never closed: end it with a line "---" before the skill\'s instructions', 'SYNTAX'],
    ['YAML that does not parse', '---\nname: x\ndescription: [unclosed\n---\n', 3, 'front matter is not valid YAML', 'SYNTAX'],
    ['no name', '---\ndescription: D.\n---\n', 2, 'a skill needs a name (name: release-notes)', 'INVALID_FIELD'],
    ['no description', '---\nname: x\n---\n', 2, 'a skill needs a description', 'INVALID_FIELD'],
    ['a name with path characters', '---\nname: ../etc\ndescription: D.\n---\n', 2, 'name "../etc" is not a plain word: it may not contain path characters', 'BAD_NAME'],
    ['a description over 1024 characters', `---\nname: x\ndescription: ${'d'.repeat(1025)}\n---\n`, 3, 'description is longer than 1024 characters', 'INVALID_FIELD'],
  ])('refuses %s in one line naming the file and line, and loads nothing', (_what, text, line, message, code) => {
    skill(projectSkills(), 'good', '---\nname: good\ndescription: G.\n---\n')
    const file = skill(projectSkills(), 'x', text)
    const refused = refusal(() => load())
    expect(refused.code).toBe(code)
    expect(refused.message.startsWith(`${file}:${line}: ${message}`), refused.message).toBe(true)
  })

  it('refuses a file over the bound unread, a binary file, two folders with one name, and a symlink loop, each naming the file', () => {
    const big = skill(projectSkills(), 'big', `---\nname: big\ndescription: B.\n---\n${'x'.repeat(MAX_SKILL_BYTES)}`)
    expect(refusal(() => load()).message).toBe(`${big}: the skill is larger than 1 MiB; a skill's instructions are a page; put long material in files beside it`)
    rmSync(join(projectSkills(), 'big'), { recursive: true })
    const binary = skill(projectSkills(), 'bin', '---\nname: bin\ndescription: B.\n---\n\u0000')
    expect(refusal(() => load()).message).toBe(`${binary}: the skill is not text (it holds NUL bytes)`)
    rmSync(join(projectSkills(), 'bin'), { recursive: true })
    skill(projectSkills(), 'a', '---\nname: same\ndescription: A.\n---\n')
    const second = skill(projectSkills(), 'b', '---\nname: same\ndescription: B.\n---\n')
    expect(refusal(() => load()).message).toBe(`${second}: skill "same" is also defined by ${join(projectSkills(), 'a', 'SKILL.md')}; one directory defines each name once`)
    rmSync(projectSkills(), { recursive: true })
    mkdirSync(projectSkills(), { recursive: true })
    symlinkSync(join(projectSkills(), 'loop'), join(projectSkills(), 'loop'))
    const loop = refusal(() => load())
    expect(loop.code).toBe('UNREADABLE')
    expect(loop.message).toBe(`${join(projectSkills(), 'loop')}: cannot read the skill: a symlink loop`)
  })

  it('refuses an unreadable skills directory, naming it', () => {
    mkdirSync(projectSkills(), { recursive: true })
    // Only the skills directory is closed: its parents (mkdtemp's are 0700) stay open to all.
    for (const dir of [root, cwd, join(cwd, '.dsh'), home]) chmodSync(dir, 0o755)
    chmodSync(projectSkills(), 0)
    try {
      const denied = process.getuid?.() === 0 ? refusalAsNobody() : refusal(() => load())
      expect(denied.code).toBe('UNREADABLE')
      expect(denied.message).toBe(`${projectSkills()}: cannot read the skills directory: permission denied`)
    } finally {
      chmodSync(projectSkills(), 0o755)
    }
  })

  it('refuses a skills directory that is a symlink loop, naming it', () => {
    mkdirSync(join(cwd, '.dsh'))
    symlinkSync(projectSkills(), projectSkills())
    const loop = refusal(() => load())
    expect(loop.code).toBe('UNREADABLE')
    expect(loop.message).toBe(`${projectSkills()}: cannot read the skills directory: a symlink loop`)
  })

  it('lists the files beside SKILL.md, folder by folder, not entering a symlinked folder', () => {
    const dir = join(projectSkills(), 'release-notes')
    skill(projectSkills(), 'release-notes', RELEASE_NOTES)
    writeFileSync(join(dir, 'template.md'), 'T')
    mkdirSync(join(dir, 'scripts'))
    writeFileSync(join(dir, 'scripts', 'tags.sh'), 'git tag')
    symlinkSync(dir, join(dir, 'self'))
    expect(skillFiles(dir)).toEqual({ files: [join(dir, 'scripts', 'tags.sh'), join(dir, 'self'), join(dir, 'template.md')], more: 0, problems: [] })
  })
})

describe('the skills service', () => {
  it('serves the skills it loaded and says each warning at start', async () => {
    skill(projectSkills(), 'deploy', '---\nname: deploy\ndescription: Deploys.\nallowed-tools: Bash\n---\nPush.\n')
    const ctx = new Context()
    const said: string[] = []
    ctx.logger.exporter({ colors: 0, levels: { default: 2 }, export: (message) => void said.push(String(message.args.join(' '))) } as Parameters<typeof ctx.logger.exporter>[0])
    await ctx.plugin(SkillsService, { cwd, home })
    expect(ctx.skills.list().map((found) => found.name)).toEqual(['deploy'])
    expect(ctx.skills.get('deploy')?.instructions).toBe('Push.')
    expect(ctx.skills.get('nobody')).toBeUndefined()
    expect(said.filter((line) => line.includes('allowed-tools is not applied'))).toHaveLength(1)
  })

  it('fails its start on a bad skill, so none is served', async () => {
    skill(projectSkills(), 'bad', '---\nname: bad\n---\n')
    const ctx = new Context()
    await expect(ctx.plugin(SkillsService, { cwd, home })).rejects.toThrow(/bad\/SKILL\.md:2: a skill needs a description/)
    expect(ctx.get('skills')).toBeUndefined()
  })
})
