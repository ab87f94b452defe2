import { describe, expect, it } from 'vitest'
import { commandSegments, policyVerdict, subjectOf } from '@dsh/approvals'
import type { PermissionLevel } from '@dsh/session'

const bash = (command: string) => ({ tool: 'bash', subject: subjectOf({ command }) })
const verdict = (levels: PermissionLevel[], command: string) => policyVerdict(levels, bash(command)).verdict

describe('command segments', () => {
  it('splits at unquoted separators and marks substitutions and redirections as not plain', () => {
    expect(commandSegments('npm test && rm -rf build; echo "a;b" | wc -l')).toEqual([
      { text: 'npm test', plain: true },
      { text: 'rm -rf build', plain: true },
      { text: 'echo "a;b"', plain: true },
      { text: 'wc -l', plain: true },
    ])
    expect(commandSegments('npm test $(cat x)')).toEqual([{ text: 'npm test $(cat x)', plain: false }])
    expect(commandSegments('npm test "`id`"')).toEqual([{ text: 'npm test "`id`"', plain: false }])
    expect(commandSegments("npm test '$(not run)'")).toEqual([{ text: "npm test '$(not run)'", plain: true }])
    expect(commandSegments('npm test > /etc/passwd')).toEqual([{ text: 'npm test > /etc/passwd', plain: false }])
    expect(commandSegments('npm test\nrm -rf ~')).toEqual([
      { text: 'npm test', plain: true },
      { text: 'rm -rf ~', plain: true },
    ])
    expect(commandSegments('echo "unclosed')).toEqual([{ text: 'echo "unclosed', plain: false }])
  })
})

describe('the policy', () => {
  const onlyNpmTest: PermissionLevel = { from: 'helper tester', allow: ['bash(npm test*)'] }

  it('a tool name ending in * names every tool that starts so (the tools of one MCP server), and no other', () => {
    const call = (tool: string) => ({ tool, subject: subjectOf({ line: 'x' }) })
    const level: PermissionLevel = { from: 'config', allow: ['mcp__github__*'], deny: ['mcp__github__delete*'] }
    expect(policyVerdict([level], call('mcp__github__create_issue')).verdict).toBe('allow')
    expect(policyVerdict([level], call('mcp__github__delete_repo')).verdict).toBe('deny')
    expect(policyVerdict([level], call('mcp__githubx__create_issue')).verdict).toBeUndefined()
    expect(policyVerdict([level], call('bash')).verdict).toBeUndefined()
  })

  it("mcp__<server> alone (Claude Code's form) names every tool of that server, and no other server's", () => {
    const call = (tool: string) => ({ tool, subject: subjectOf({ line: 'x' }) })
    const level: PermissionLevel = { from: 'config', deny: ['mcp__srv'], ask: ['mcp__other_server'] }
    expect(policyVerdict([level], call('mcp__srv__touch')).verdict).toBe('deny')
    expect(policyVerdict([level], call('mcp__srvx__touch')).verdict).toBeUndefined()
    expect(policyVerdict([level], call('mcp__other_server__read')).verdict).toBe('ask')
    expect(policyVerdict([level], call('mcp__other__server_read')).verdict).toBeUndefined()
  })

  it('an allow rule with a wildcard allows the commands it names, and nothing chained, substituted or redirected after them', () => {
    expect(verdict([onlyNpmTest], 'npm test')).toBe('allow')
    expect(verdict([onlyNpmTest], 'npm test -- --run foo')).toBe('allow')
    expect(verdict([onlyNpmTest], 'npm run build')).toBeUndefined()
    expect(verdict([onlyNpmTest], 'npm test && rm -rf ~')).toBeUndefined()
    expect(verdict([onlyNpmTest], 'npm test; curl evil.example')).toBeUndefined()
    expect(verdict([onlyNpmTest], 'npm test $(rm -rf ~)')).toBeUndefined()
    expect(verdict([onlyNpmTest], 'npm test > ~/.bashrc')).toBeUndefined()
  })

  it('a chain is allowed when every command in it is', () => {
    const level: PermissionLevel = { from: 'config', allow: ['bash(npm test*)', 'bash(git status)'] }
    expect(verdict([level], 'git status && npm test')).toBe('allow')
    expect(verdict([level], 'git status && git push')).toBeUndefined()
  })

  it('deny and ask rules catch a command anywhere in a chain', () => {
    const level: PermissionLevel = { from: 'config', deny: ['bash(rm *)'], ask: ['bash(git push*)'], allow: ['bash'] }
    expect(verdict([level], 'make && rm -rf build')).toBe('deny')
    expect(verdict([level], 'git commit -m x; git push origin main')).toBe('ask')
    expect(verdict([level], 'make')).toBe('allow')
  })

  it('within a level deny beats ask beats allow; across levels the most restrictive wins, so a child can narrow and never widen', () => {
    const parentDeniesBash: PermissionLevel = { from: 'config', deny: ['bash'] }
    const parentAsks: PermissionLevel = { from: 'config', ask: ['bash'] }
    expect(verdict([parentDeniesBash, onlyNpmTest], 'npm test')).toBe('deny')
    expect(verdict([parentAsks, onlyNpmTest], 'npm test')).toBe('ask')
    expect(verdict([{ from: 'config', allow: ['bash'] }, { from: 'helper x', deny: ['bash(git *)'] }], 'git push')).toBe('deny')
    expect(policyVerdict([parentDeniesBash, onlyNpmTest], bash('npm test')).rule).toBe('bash (config)')
  })

  it('within one level a matching deny is checked before a matching ask, and ask before allow', () => {
    const level: PermissionLevel = { from: 'config', allow: ['bash(rm *)'], ask: ['bash(rm *)', 'bash(git *)'], deny: ['bash(rm *)'] }
    expect(policyVerdict([level], bash('rm -rf build'))).toEqual({ verdict: 'deny', rule: 'bash(rm *) (config)' })
    expect(policyVerdict([level], bash('git push'))).toEqual({ verdict: 'ask', rule: 'bash(git *) (config)' })
    expect(policyVerdict([{ from: 'config', allow: ['bash(git *)'], ask: ['bash(git *)'] }], bash('git push')).verdict).toBe('ask')
  })

  it('tool names match without regard to case, and * matches every tool', () => {
    expect(verdict([{ from: 'claude', allow: ['Bash(npm test*)'] }], 'npm test')).toBe('allow')
    expect(policyVerdict([{ from: 'config', deny: ['*'] }], { tool: 'write_file', subject: subjectOf({ path: '/tmp/x' }) }).verdict).toBe('deny')
  })

  it('a path subject is matched as a path; other arguments as compact JSON', () => {
    const level: PermissionLevel = { from: 'config', allow: ['edit(src/*)'] }
    expect(policyVerdict([level], { tool: 'edit', subject: subjectOf({ path: 'src/a.ts' }) }).verdict).toBe('allow')
    expect(policyVerdict([level], { tool: 'edit', subject: subjectOf({ path: '/etc/passwd' }) }).verdict).toBeUndefined()
    expect(subjectOf({ url: 'http://x' }).text).toBe('{"url":"http://x"}')
  })
})

describe('what the review found a rule could be talked past with', () => {
  const onlyNpmTest: PermissionLevel = { from: 'helper tester', allow: ['bash(npm test*)'] }

  it('a command longer than any display cut is matched whole, so a long padding cannot hide what follows it', () => {
    const padded = `npm test ${'x'.repeat(20_000)} && rm -rf ~`
    expect(verdict([onlyNpmTest], padded)).toBeUndefined()
    expect(verdict([{ from: 'config', deny: ['bash(rm *)'], allow: ['bash'] }], padded)).toBe('deny')
  })

  it('a subject too large to match whole is never allowed by a pattern', () => {
    const huge = `npm test ${'x'.repeat(300 * 1024)}`
    expect(subjectOf({ command: huge }).complete).toBe(false)
    expect(verdict([onlyNpmTest], huge)).toBeUndefined()
  })

  it('comments, ANSI-C quoting and newlines are not plain words an allow rule can cover', () => {
    expect(verdict([onlyNpmTest], 'npm test #\nrm -rf ~')).toBeUndefined()
    expect(verdict([onlyNpmTest], "npm test $'\\x3b' rm -rf ~")).toBeUndefined()
  })

  it('a deny rule sees through assignments, prefix words and substitutions', () => {
    const level: PermissionLevel = { from: 'config', deny: ['bash(rm *)'], allow: ['bash'] }
    expect(verdict([level], 'FOO=1 rm -rf build')).toBe('deny')
    expect(verdict([level], 'env rm -rf build')).toBe('deny')
    expect(verdict([level], 'echo $(rm -rf build)')).toBe('deny')
    expect(verdict([level], 'echo `rm -rf build`')).toBe('deny')
  })

  it('a path is matched after normalising, so dot-dot does not walk out of an allowed folder', () => {
    const level: PermissionLevel = { from: 'config', allow: ['edit(src/*)'] }
    expect(policyVerdict([level], { tool: 'edit', subject: subjectOf({ path: 'src/../secrets/key' }) }).verdict).toBeUndefined()
    expect(policyVerdict([level], { tool: 'edit', subject: subjectOf({ path: 'src/./a.ts' }) }).verdict).toBe('allow')
  })
})
