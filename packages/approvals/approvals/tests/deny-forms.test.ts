import { describe, expect, it } from 'vitest'
import { policyVerdict, subjectOf } from '@dsh/approvals'
import type { PermissionLevel } from '@dsh/session'

const verdict = (levels: PermissionLevel[], command: string) => policyVerdict(levels, { tool: 'bash', subject: subjectOf({ command }) })
const denyRm: PermissionLevel = { from: 'config', deny: ['bash(rm *)'], allow: ['bash'] }

describe('what a deny rule sees through', () => {
  it('white space, ${IFS}, quotes, backslashes and a path in the command word', () => {
    for (const command of ['rm\t-rf x', 'rm${IFS}-rf x', 'rm$IFS-rf x', '"rm" -rf x', "r''m -rf x", '\\rm -rf x', '/bin/rm -rf x', 'r\\\nm -rf x']) {
      expect(verdict([denyRm], command).verdict, JSON.stringify(command)).toBe('deny')
    }
  })

  it('the commands of process substitutions, substitutions, subshells, groups and strings run as commands', () => {
    for (const command of [
      'cat <(rm -rf x)',
      'tee >(rm -rf x)',
      'echo $(echo $(rm -rf x))',
      'echo $( (rm -rf x) )',
      'echo `rm -rf x`',
      'echo "$(echo ")"; rm -rf x)"',
      '(rm -rf x)',
      '{ rm -rf x; }',
      'if true; then rm -rf x; fi',
      'bash -c "rm -rf x"',
      "sh -ec 'echo; rm -rf x'",
      'eval rm -rf x',
      'find . -name y -exec rm -f {} \\;',
      'cat > f <<EOF\n$(rm -rf x)\nEOF',
      "echo $'\\''; rm -rf x; echo '",
      "echo x #'\nrm -rf x\n'",
    ]) {
      expect(verdict([denyRm], command).verdict, JSON.stringify(command)).toBe('deny')
    }
  })

  it('the words that run the rest as a command, with their options', () => {
    for (const command of [
      'env -i rm -rf x',
      'env -u HOME A=1 rm -rf x',
      'command -p rm -rf x',
      'exec -a NAME rm -rf x',
      'time -p rm -rf x',
      'nice -n 5 rm -rf x',
      'nohup rm -rf x',
      'timeout 5 rm -rf x',
      'timeout -s KILL 5 rm -rf x',
      'sudo -u x rm -rf y',
      'sudo -E A=1 -- rm -rf y',
      'builtin rm -rf x',
      'xargs rm',
      'xargs -0 -n 1 rm -f',
      'A=1 B="2 3" nohup nice -5 env rm -rf x',
      '/usr/bin/env rm -rf x',
    ]) {
      expect(verdict([denyRm], command).verdict, command).toBe('deny')
    }
  })

  it('where the reading cannot tell what runs, a restrictive rule of the tool asks instead of letting it through', () => {
    const askPush: PermissionLevel = { from: 'config', ask: ['bash(git push*)'], allow: ['bash'] }
    for (const command of [
      '$cmd -rf x',
      'r? -rf x',
      '{r,m}m -rf x',
      'sudo --weird rm -rf x',
      'env -S "rm -rf x"',
      'echo ${x@P}',
      'x=1; echo $((x))',
      "declare -i n; n='a[$(rm -rf x)]'",
      'eval "$cmd"',
      'bash -c "$cmd"',
      'cat <<EOF\nno end',
      'echo "unclosed',
      'f() { rm -rf x; }; f',
    ]) {
      const decided = verdict([denyRm], command)
      expect(decided.verdict, JSON.stringify(command)).toBe('ask')
      expect(decided.rule).toBe('bash(rm *) (config; dsh cannot tell what this command runs)')
      expect(verdict([askPush], command).verdict, JSON.stringify(command)).toBe('ask')
    }
    // A subject seen only in part could hide anything past the part.
    expect(verdict([denyRm], `echo ${'x'.repeat(300 * 1024)}`).verdict).toBe('ask')
    // Without a restrictive rule of the tool, nothing is asked for it.
    expect(verdict([{ from: 'config', deny: ['edit(/etc/*)'], allow: ['bash'] }], '$cmd -rf x').verdict).toBe('allow')
  })

  it('what it can tell is not asked about: ordinary commands, loops, tests and here-documents run unasked where bash is allowed', () => {
    for (const command of [
      'make && npm test',
      'echo $HOME',
      '[ -f x ] && make',
      'for f in *.ts; do echo $f; done',
      "cat > notes.md <<'EOF'\n$(not run) ${x@P}\nEOF\nmake",
      'cat > notes.md <<EOF\nhello $USER\nEOF',
      'ls [ab]* | wc -l',
      'command -v git && git status',
      'echo rm -rf x',
    ]) {
      expect(verdict([denyRm], command).verdict, JSON.stringify(command)).toBe('allow')
    }
  })
})
