/**
 * When a composition loads `@dsh/skills` and `@dsh/tool-skill`: only when the config names
 * the skills entry or a skills directory this run would read holds something. A run without
 * skills then loads neither package (nor the definitions parser they share), so the feature
 * costs nothing when it is off, as `module-loading.test.ts` checks for `dsh run`.
 */
import { readdirSync } from 'node:fs'
import { join } from 'node:path'
import type { PluginEntry } from './config-entries.js'
import { dshHome } from './config-file.js'

const SKILLS_PLUGINS = new Set(['@dsh/skills', '@dsh/tool-skill'])

/**
 * `entries` without the default skills entries when nothing asks for them: the user's config
 * names neither plugin, and neither `./.dsh/skills` nor `$DSH_HOME/skills` holds an entry
 * (`discover` false: the demo, which must not depend on the machine, never looks).
 */
export function withSkills(entries: PluginEntry[], user: readonly PluginEntry[], discover: boolean, cwd = process.cwd()): PluginEntry[] {
  if (user.some((entry) => SKILLS_PLUGINS.has(entry.name))) return entries
  if (discover && (holdsAnything(join(cwd, '.dsh', 'skills')) || holdsAnything(join(dshHome(), 'skills')))) return entries
  return entries.filter((entry) => !SKILLS_PLUGINS.has(entry.name))
}

/** Whether `dir` has any entry; an error other than absence is the plugin's to report, so it loads. */
function holdsAnything(dir: string): boolean {
  try {
    return readdirSync(dir).length > 0
  } catch (error) {
    return (error as NodeJS.ErrnoException).code !== 'ENOENT'
  }
}
