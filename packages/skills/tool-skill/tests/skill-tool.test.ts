import { mkdirSync, mkdtempSync, rmSync, writeFileSync } from 'node:fs'
import { tmpdir } from 'node:os'
import { join } from 'node:path'
import { afterEach, beforeEach, describe, expect, it } from 'vitest'
import { createDelegationHarness, type DelegationHarness } from '@dsh/testkit/delegation'
import type { HarnessOptions } from '@dsh/testkit/harness'
import { textOf } from '@dsh/llm'
import { AgentDefinitionsService } from '@dsh/agent-definitions'
import { SpawnPlugin } from '@dsh/subagent-spawn'
import { SubagentToolPlugin } from '@dsh/tool-subagent'
import { SkillsService } from '@dsh/skills'
import { SkillToolPlugin } from '../src/index.js'

let root: string
let harness: DelegationHarness | undefined
beforeEach(() => {
  root = mkdtempSync(join(tmpdir(), 'dsh-skill-tool-'))
})
afterEach(async () => {
  await harness?.dispose()
  harness = undefined
  rmSync(root, { recursive: true, force: true })
})

const skillsDir = () => join(root, '.dsh', 'skills')
function skill(name: string, description: string, body: string, beside: Record<string, string> = {}): string {
  const dir = join(skillsDir(), name)
  mkdirSync(dir, { recursive: true })
  writeFileSync(join(dir, 'SKILL.md'), `---\nname: ${name}\ndescription: ${description}\n---\n${body}\n`)
  for (const [file, text] of Object.entries(beside)) {
    mkdirSync(join(dir, file, '..'), { recursive: true })
    writeFileSync(join(dir, file), text)
  }
  return dir
}
function define(name: string, front: string): void {
  const dir = join(root, '.dsh', 'agents')
  mkdirSync(dir, { recursive: true })
  writeFileSync(join(dir, `${name}.md`), `---\nname: ${name}\n${front}\n---\nYou are the ${name} persona.\n`)
}

async function setup(script: HarnessOptions['script']): Promise<DelegationHarness> {
  harness = await createDelegationHarness({ script, plugins: [[SpawnPlugin, {}]] })
  await harness.plugin(AgentDefinitionsService, { cwd: root, home: join(root, 'home') })
  await harness.plugin(SubagentToolPlugin, { helpers: true })
  await harness.plugin(SkillsService, { cwd: root, home: join(root, 'home') })
  await harness.plugin(SkillToolPlugin, {})
  return harness
}

const results = (agent: { session: { ownEvents(): readonly { type: string }[] } }) =>
  agent.session.ownEvents().flatMap((event) => (event.type === 'tool/result' ? [textOf((event as unknown as { result: { content: Parameters<typeof textOf>[0] } }).result.content)] : []))

describe('the skill tool', () => {
  it('lists every skill by name and description in the prompt, the same bytes each turn, and loads one: its instructions and the files beside it', async () => {
    const dir = skill('triage', 'Sorts new issues by area.', 'Label each issue.')
    skill('release-notes', 'Writes release notes.', '# Notes\nFill in template.md.', { 'template.md': '## Changes', 'scripts/tags.sh': 'git tag' })
    const h = await setup([{ reply: [{ call: { tool: 'skill', args: { name: 'release-notes' } } }, { text: 'loaded' }, { text: 'again' }] }])
    const agent = await h.agent()
    await agent.followup('write the notes')
    await agent.followup('once more')
    const systems = h.requests.map((request) => request.system)
    expect(new Set(systems).size).toBe(1)
    expect(systems[0]).toContain(
      [
        '# Skills',
        "Skills are instructions for particular kinds of task, kept on disk until they are needed. When a task matches a skill's description, call `skill` with its name before you start, and follow what it returns; it also lists the skill's files, to read when the instructions call for them.",
        '- release-notes: Writes release notes.',
        '- triage: Sorts new issues by area.',
      ].join('\n'),
    )
    expect(systems[0]).not.toContain('Label each issue')
    const notes = join(skillsDir(), 'release-notes')
    expect(results(agent)).toEqual([
      [
        `Skill "release-notes" (${join(notes, 'SKILL.md')}):`,
        '',
        '# Notes\nFill in template.md.',
        '',
        `Files beside it in ${notes} (read them when the instructions call for them):`,
        `- ${join(notes, 'scripts', 'tags.sh')}`,
        `- ${join(notes, 'template.md')}`,
      ].join('\n'),
    ])
    expect(h.ctx.tools.get('skill')!.sideEffecting).toBeFalsy()
    expect(dir).toBeDefined()
  })

  it('is not there, nor is the section, when no skill exists', async () => {
    const h = await setup([{ reply: [{ text: 'x' }] }])
    const agent = await h.agent()
    await agent.followup('go')
    expect(h.ctx.tools.get('skill')).toBeUndefined()
    expect(h.requests[0]!.system).not.toContain('# Skills')
  })

  it("limits a helper to its definition's skills, and every agent below it too: the prompt lists only those and a call for another is refused", async () => {
    skill('triage', 'Sorts issues.', 'Triage body.')
    skill('deploy', 'Deploys the service.', 'Deploy body.')
    skill('notes', 'Writes release notes.', 'Notes body.')
    define('sorter', 'description: Sorts issues.\nskills: [triage, notes]')
    define('mute', 'description: Uses no skill.\nskills: []')
    define('wide', 'description: Deploys and sorts.\nskills: [deploy, triage]')
    const h = await setup([
      { when: { prompt: '^sort' }, reply: [{ calls: [{ tool: 'skill', args: { name: 'deploy' } }, { tool: 'subagent', args: { agent: 'wide', description: 'inner', prompt: 'inner work' } }] }, { text: 'sorted' }] },
      { when: { prompt: '^inner' }, reply: [{ call: { tool: 'skill', args: { name: 'deploy' } } }, { text: 'inner done' }] },
      { when: { prompt: '^quiet' }, reply: [{ text: 'quiet' }] },
      { reply: [{ calls: [{ tool: 'subagent', args: { agent: 'sorter', description: 'sort', prompt: 'sort the issues' } }, { tool: 'subagent', args: { agent: 'mute', description: 'quiet', prompt: 'quiet work' } }] }, { text: 'done' }] },
    ])
    const parent = await h.agent()
    expect((await parent.followup('go')).reason).toBe('completed')
    const system = (persona: string) => h.requests.find((request) => request.system.includes(persona))!.system
    expect(h.requests[0]!.system).toContain('- deploy: Deploys the service.\n- notes: Writes release notes.\n- triage: Sorts issues.')
    expect(system('sorter persona')).toContain('# Skills')
    expect(system('sorter persona')).toContain('- notes: Writes release notes.\n- triage: Sorts issues.')
    expect(system('sorter persona')).not.toContain('- deploy:')
    expect(system('mute persona')).not.toContain('# Skills')
    // A helper the sorter starts gets no skill the sorter was not given, whatever its own list says.
    expect(system('wide persona')).toMatch(/# Skills\n.*\n- triage: Sorts issues\.(\n\n|$)/)
    const stored = await h.ctx.sessions.listStored()
    const children = await Promise.all(stored.filter((header) => header.parentSession !== undefined).map(async (header) => (await h.ctx.sessions.readStored(header.id))!.events))
    const refused = children.flat().flatMap((event) => (event.type === 'tool/result' && event.result.isError ? [textOf(event.result.content)] : []))
    expect(refused.sort()).toEqual(['no skill named "deploy" is yours to use (yours: notes, triage)', 'no skill named "deploy" is yours to use (yours: triage)'])
  })
})
