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

  it("a shell's -c string past `--` and the long options it knows, and what a find -exec runs read as a command of its own", () => {
    for (const command of [
      "bash -c -- 'rm -rf x'",
      "sh -e -c -- 'rm -rf x'",
      "bash --rcfile /dev/null -c 'rm -rf x'",
      "bash --init-file /dev/null -c 'rm -rf x'",
      "bash --login --norc --noprofile -c 'rm -rf x'",
      "bash --weird -c 'rm -rf x'",
      "bash -oc pipefail 'rm -rf x'",
      "bash -eOc extglob 'rm -rf x'",
      "find . -exec sh -c 'rm -rf x' \\;",
      'find . -exec env rm -rf x \\;',
      'find . -exec sudo rm -rf x \\;',
      'find . -execdir /bin/rm -f {} +',
      'find . -name y -ok nice -n 5 rm -f {} \\; -print',
      'xargs --replace rm {}',
      'xargs --replace rm x',
      'xargs --eof rm x',
      'xargs -i rm {}',
      'xargs -l1 rm',
      'busybox rm -rf x',
      "busybox sh -c 'rm -rf x'",
      'flock /tmp/lock rm -rf x',
      'flock -w 5 /tmp/lock rm -rf x',
      'chroot / rm -rf x',
      'chroot --userspec=1:1 / rm -rf x',
      'taskset -c 0 rm -rf x',
      'chrt -f 1 rm -rf x',
    ]) {
      expect(verdict([denyRm], command).verdict, JSON.stringify(command)).toBe('deny')
    }
  })

  it('a shell reading commands from its input or a file, a shell of another language, and commands that run others in ways the reading does not follow are asked', () => {
    for (const command of [
      "echo 'rm -rf x' | sh",
      "bash <<< 'rm -rf x'",
      'bash script.sh',
      'sh < file',
      'bash -s',
      'xargs sh',
      "bash --weird -c 'ls'",
      "bash --rcfile=/dev/null -c 'ls'",
      "fish -c 'rm -rf x'",
      "csh -c 'rm -rf x'",
      "tcsh -c 'rm -rf x'",
      "echo 'rm -rf x' | busybox ash",
      "echo 'rm -rf x' | ksh",
      "echo 'rm -rf x' | sudo -s",
      "echo 'rm -rf x' | doas -s",
      "echo 'rm -rf x' | chroot /",
      'find . -exec {} \\;',
      'find . $action rm -rf x \\;',
      "flock /tmp/lock -c 'rm -rf x'",
      "su -c 'rm -rf x'",
      "script -c 'rm -rf x'",
      'watch rm -rf x',
      'strace rm -rf x',
      'ltrace rm -rf x',
      'firejail rm -rf x',
      'nsenter -t 1 -m rm -rf x',
      'ssh host rm -rf x',
      'parallel rm ::: x',
      'runuser -u x rm -rf y',
      'setpriv --reuid=1 rm -rf x',
      'unshare -r rm -rf x',
      "sg wheel 'rm -rf x'",
      "echo 'rm -rf x' | at now",
      // A builtin or a variable that makes a later word run something else.
      'hash -p /bin/rm del; del x',
      "PS4='$(rm -rf x)'; set -x; :",
      "BASH_ENV=<(echo 'rm -rf x') bash -c :",
      "env BASH_ENV=<(echo 'rm -rf x') bash -c :",
      "PROMPT_COMMAND='rm -rf x' bash -i",
      'PATH=. del x',
      "env GIT_SSH_COMMAND='rm -rf x' git fetch",
      'ssh-agent rm -rf x',
    ]) {
      const decided = verdict([denyRm], command)
      expect(decided.verdict, JSON.stringify(command)).toBe('ask')
      expect(decided.rule, JSON.stringify(command)).toBe('bash(rm *) (config; dsh cannot tell what this command runs)')
    }
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
      "bash -c -- 'make'",
      "find . -name '*.ts' -exec grep -l x {} +",
      'find . -type f -exec env LC_ALL=C wc -l {} \\;',
      'xargs -I % cp % dest',
      'flock /tmp/lock make',
      'CI=1 FOO=bar make test',
      'env LC_ALL=C sort x',
    ]) {
      expect(verdict([denyRm], command).verdict, JSON.stringify(command)).toBe('allow')
    }
  })
})
