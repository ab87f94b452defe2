import { writeFileSync } from 'node:fs'
import { join } from 'node:path'

/** A root under a tree budget of one child: its second delegation and a background one are refused before they start. */
export function budgetRefusals(dir: string): { config: string; script: string } {
  const config = join(dir, 'dsh.yml')
  writeFileSync(config, ['- id: subagents', '  name: "@dsh/subagent"', '  config: { tree: { budget: { children: 1 } } }', ''].join('\n'))
  const script = join(dir, 'script.yml')
  writeFileSync(
    script,
    [
      '- when: { depth: 1 }',
      '  reply: [{ text: "done" }]',
      '- when: { depth: 0 }',
      '  reply:',
      '    - call: { tool: subagent, args: { description: "first", prompt: "one" } }',
      '    - call: { tool: subagent, args: { description: "refused", prompt: "two" } }',
      '    - call: { tool: subagent, args: { description: "too late", prompt: "three", run_in_background: true } }',
      '    - call: { tool: task_output, args: { task_id: subagent-1, wait: true } }',
      '    - text: "root done"',
      '',
    ].join('\n'),
  )
  return { config, script }
}
