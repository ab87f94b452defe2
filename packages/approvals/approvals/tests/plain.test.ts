import { describe, expect, it } from 'vitest'
import { commandSegments, policyVerdict, subjectOf } from '@dsh/approvals'
import type { PermissionLevel } from '@dsh/session'

const verdict = (levels: PermissionLevel[], command: string) => policyVerdict(levels, { tool: 'bash', subject: subjectOf({ command }) }).verdict
const wildcards: PermissionLevel = { from: 'config', allow: ['bash(echo *)', 'bash(git status*)', 'bash(x*)', 'bash(printf *)', 'bash(test *)'] }

describe('a plain command: what a wildcard allow rule may match', () => {
  it('a substitution hidden in a parameter or arithmetic expansion is not plain, so it is asked (bash runs it)', () => {
    for (const command of [
      "echo ${x:='a[$(id)]'} $[x]",
      'echo ${x@P}',
      'echo ${y[x]}',
      'echo ${x:x}',
      'echo $((x))',
      'echo $[x]',
      'git status ${x:-$(id)}',
      'echo "${x@P}"',
      'git status "$((a[0]))"',
    ]) {
      expect(commandSegments(command)[0]!.plain, command).toBe(false)
      expect(verdict([wildcards], command), command).toBeUndefined()
    }
  })

  it('every other construct the reading does not understand completely is asked too', () => {
    for (const command of [
      'echo {a,$(id)}', // brace expansion (with a substitution)
      'echo {a,b}',
      'echo ~root', // ~user
      'echo !!', // history, negation
      'echo x <<< y', // here-string
      'echo <(id)', // process substitution
      'echo >(id)',
      'coproc id',
      'x(){ id; }; x',
      'eval id',
      'source ./x.sh',
      '. ./x.sh',
      'alias x=id',
      'echo a\\\nb', // backslash-newline
      "echo $'\\x41'", // ANSI-C quoting
      'echo $"hello"',
      'echo @(a|b)', // extglob
      '[[ 1 -eq x ]]',
      '(( x ))',
      "declare 'a[$(id)]=1'",
      "printf -v 'a[$(id)]' x",
      "printf 'hi'", // printf can assign (-v) a subscripted name
      "test -v 'a[$(id)]'",
      'let x',
      'x[0]=1 echo hi', // array subscript
      'echo a[1]',
      "echo a\rb", // a control character
      'echo x # a comment',
      'echo x >/tmp/y',
      'ech? hi', // a glob as the command word
      '$x hi', // an expansion as the command word
      '"echo" hi', // a quoted command word
      'echo "unclosed',
      'echo $(',
      'cat <<EOF\nEOF',
    ]) {
      expect(verdict([wildcards], command), JSON.stringify(command)).toBeUndefined()
    }
  })

  it('what it does understand stays plain: literal words, quotes, $NAME, special parameters and globs in arguments', () => {
    for (const command of ['echo hi', 'echo $HOME "a b" \'c d\' $1 $@', 'echo \'${x@P} $(id) a[1]\'', 'git status --short -- src/*.ts', 'echo ~ ~/x', 'echo a\tb', 'echo x && git status', 'xargs-like --flag=1']) {
      expect(commandSegments(command).every((segment) => segment.plain), command).toBe(true)
      expect(verdict([wildcards], command), command).toBe('allow')
    }
  })

  it('a bare tool name or an exact rule still allows what is not plain', () => {
    expect(verdict([{ from: 'config', allow: ['bash'] }], 'echo ${x@P}')).toBe('allow')
    expect(verdict([{ from: 'config', allow: ['bash(echo ${HOME})'] }], 'echo ${HOME}')).toBe('allow')
  })

  it('a separator inside a substitution does not end the command around it', () => {
    expect(commandSegments('echo "$(echo ")"; id)" && git status')).toEqual([
      { text: 'echo "$(echo ")"; id)"', plain: false },
      { text: 'git status', plain: true },
    ])
  })
})
