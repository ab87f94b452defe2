import { describe, expect, it } from 'vitest'
import { commandSegments, displaySubject, policyVerdict, subjectOf } from '@dsh/approvals'
import type { PermissionLevel } from '@dsh/session'

// Each of these inputs took a minute or more of CPU with a super-linear regular expression
// (200 KiB of spaces in the one-line display, several `*` in a rule against a long subject).
// Linear work finishes them in milliseconds; the test's own timeout is the only clock.
const KIB = 1024

describe('the work on a subject is linear in its length', () => {
  it('the one-line display of 200 KiB of white space, with and without newlines', () => {
    const spaces = ' '.repeat(200 * KIB)
    expect(displaySubject(spaces)).toBe(`${' '.repeat(399)}…`)
    expect(displaySubject(`a${'\t'.repeat(200 * KIB)}b`, 4)).toBe('a\t\t…')
    expect(displaySubject(`a${spaces}\n${spaces}b`)).toBe('a ⏎ b')
    expect(displaySubject(`${' \n'.repeat(100 * KIB)}x`)).toBe(' ⏎ x')
    // What the display did before, on a short input: the same line.
    const sample = 'npm test  \n\n  && make\t\n'
    expect(displaySubject(sample)).toBe(sample.replace(/\s*\n\s*/g, ' ⏎ '))
  })

  it('a rule with several wildcards against a subject of 256 KiB', () => {
    const level: PermissionLevel = { from: 'config', deny: ['bash(*a*a*a*a*b)'], ask: ['bash(*x*y*z*)'], allow: ['bash(echo *a*a*a*b)'] }
    const subject = subjectOf({ command: `echo ${'a'.repeat(256 * KIB - 5)}` })
    expect(subject.complete).toBe(true)
    expect(policyVerdict([level], { tool: 'bash', subject }).verdict).toBeUndefined()
    const ending = subjectOf({ command: `echo ${'a'.repeat(200 * KIB)}b` })
    expect(policyVerdict([level], { tool: 'bash', subject: ending }).verdict).toBe('deny')
  })

  it('reading a command of 256 KiB built to be hard: deep nesting, long words, many separators, many prefixes', () => {
    const level: PermissionLevel = { from: 'config', deny: ['bash(rm *)'], allow: ['bash(a*)'] }
    const cases: [string, string | undefined][] = [
      ['$('.repeat(100 * KIB), 'ask'],
      ['"$('.repeat(80 * KIB), 'ask'],
      ['`\\`'.repeat(80 * KIB), 'ask'],
      ['${'.repeat(100 * KIB), 'ask'],
      ['('.repeat(100 * KIB), 'ask'],
      ['a;'.repeat(128 * KIB), 'allow'],
      [`rm ${' '.repeat(250 * KIB)}x`, 'deny'],
      ['nohup '.repeat(40 * KIB), 'ask'],
      ['x=1 '.repeat(60 * KIB) + 'rm x', 'deny'],
      ["'".repeat(256 * KIB), undefined],
    ]
    for (const [command, expected] of cases) {
      expect(policyVerdict([level], { tool: 'bash', subject: subjectOf({ command }) }).verdict, command.slice(0, 12)).toBe(expected)
      expect(commandSegments(command).length).toBeGreaterThan(0)
    }
  })
})
