import { mkdirSync, readdirSync, readFileSync, rmSync, writeFileSync } from 'node:fs'
import { join } from 'node:path'
import { afterEach, beforeEach, describe, expect, it } from 'vitest'
import { runDsh, tempDir } from './cli.js'

/**
 * Skills through the built CLI, keyless: a SKILL.md folder in the project's ./.dsh/skills
 * is listed in a child's first model request (read off the recording `--record` stores)
 * and loaded when the child's scripted model calls `skill`.
 */
let project: string
let home: string
beforeEach(() => {
  project = tempDir('dsh-skills-project-')
  home = tempDir('dsh-skills-home-')
})
afterEach(() => {
  rmSync(project, { recursive: true, force: true })
  rmSync(home, { recursive: true, force: true })
})

function write(file: string, text: string): string {
  const path = join(project, file)
  mkdirSync(join(path, '..'), { recursive: true })
  writeFileSync(path, text)
  return path
}
const dsh = (args: string[]) => runDsh(args, { cwd: project, env: { DSH_HOME: home } })

/** The first model request of the session recorded as `lineage`. */
function firstRequest(lineage: string): { system: string; tools: { name: string }[] } {
  const [, call] = readFileSync(join(project, 'rec', `${lineage}.jsonl`), 'utf8').split('\n').filter((line) => line !== '').map((line) => JSON.parse(line) as Record<string, unknown>)
  return call!.request as { system: string; tools: { name: string }[] }
}

const SKILL = `---
name: release-notes
description: Writes release notes from the commits since the last tag.
---
Start from template.md; one line per change, newest first.
`

const SCRIPT = `- when: {depth: 0}
  reply:
    - call: {tool: subagent, args: {description: release notes, prompt: write the release notes}}
    - text: "child said: {{tool_results}}"
- when: {prompt: "^write"}
  reply:
    - call: {tool: skill, args: {name: release-notes}}
    - text: "loaded: {{tool_results}}"
`

describe('skills through the CLI', () => {
  it("a skill in ./.dsh/skills is listed in a child's first request and loaded when the child's model calls skill", async () => {
    // Inside the working directory, as paths relative to it: what read takes, the same wherever the project is.
    const dir = join('.dsh', 'skills', 'release-notes')
    write('.dsh/skills/release-notes/SKILL.md', SKILL)
    write('.dsh/skills/release-notes/template.md', '## Changes\n')
    write('script.yml', SCRIPT)
    const run = await dsh(['run', '--session-dir', 'sessions', '--record', 'rec', '--model', 'scripted:script.yml', 'go'])
    expect(run.code, run.stderr).toBe(0)
    const child = firstRequest('root.call_1')
    expect(child.system).toContain('# Skills\n')
    expect(child.system).toContain('\n- release-notes: Writes release notes from the commits since the last tag.')
    // Listed, not loaded: the body waits for the skill call.
    expect(child.system).not.toContain('Start from template.md')
    expect(child.tools.map((tool) => tool.name)).toContain('skill')
    expect(run.stdout).toBe(
      [
        `child said: loaded: Skill "release-notes" (${join(dir, 'SKILL.md')}):`,
        '',
        'Start from template.md; one line per change, newest first.',
        '',
        `Files beside it in ${dir} (read them when the instructions call for them):`,
        `- ${join(dir, 'template.md')}`,
        '',
      ].join('\n'),
    )
    // The child's session holds the load as the result of its skill call.
    const logs = readdirSync(join(project, 'sessions'))
      .filter((name) => name.endsWith('.jsonl'))
      .map((name) => readFileSync(join(project, 'sessions', name), 'utf8').split('\n').filter((line) => line !== '').map((line) => JSON.parse(line) as { header?: { parentSession?: string }; type?: string; result?: { content: unknown } }))
    const childLog = logs.find((log) => log[0]!.header?.parentSession !== undefined)!
    const results = childLog.filter((event) => event.type === 'tool/result').map((event) => JSON.stringify(event.result!.content))
    expect(results).toEqual([expect.stringContaining('Start from template.md')])
  })

  it('a bad skill is one line naming the file, exit 2, before any session', async () => {
    const file = write('.dsh/skills/broken/SKILL.md', '---\nname: broken\n---\nNo description.\n')
    write('script.yml', SCRIPT)
    const run = await dsh(['run', '--session-dir', 'sessions', '--model', 'scripted:script.yml', 'go'])
    expect(run.code).toBe(2)
    expect(run.stderr.trim().split('\n')).toEqual([expect.stringContaining(`${file}:2: a skill needs a description`)])
  })

  it('with no skills there is no skill tool and no skills section', async () => {
    write('script.yml', '- reply: [{text: hi}]\n')
    const run = await dsh(['run', '--session-dir', 'sessions', '--record', 'rec', '--model', 'scripted:script.yml', 'go'])
    expect(run.code, run.stderr).toBe(0)
    const root = firstRequest('root')
    expect(root.tools.map((tool) => tool.name)).not.toContain('skill')
    expect(root.system).not.toContain('# Skills')
  })

  it("dsh agents show lists the skills a helper may use, by its skills list", async () => {
    write('.dsh/skills/release-notes/SKILL.md', SKILL)
    write('.dsh/skills/triage/SKILL.md', '---\nname: triage\ndescription: Sorts issues.\n---\nSort.\n')
    write('.dsh/agents/sorter.md', '---\nname: sorter\ndescription: Sorts issues.\nskills: [triage]\n---\nYou sort.\n')
    const shown = await dsh(['agents', 'show', 'sorter'])
    expect(shown.code, shown.stderr).toBe(0)
    expect(shown.stdout).toContain('\nskills: triage\n')
    expect(shown.stdout).toContain('- triage: Sorts issues.')
    expect(shown.stdout).not.toContain('- release-notes:')
    write('.dsh/agents/sorter.md', '---\nname: sorter\ndescription: Sorts issues.\nskills: [triage, tirage]\n---\nYou sort.\n')
    const refused = await dsh(['config', 'check'])
    expect(refused.code).toBe(2)
    expect(refused.stderr).toContain(`${join(project, '.dsh', 'agents', 'sorter.md')}:4: helper "sorter": unknown skill "tirage" in skills (skills: release-notes, triage)`)
  })
})
