import { existsSync, readFileSync, watch } from 'node:fs'
import { join } from 'node:path'
import { afterEach, describe, expect, it } from 'vitest'
import { exists } from '@dsh/testkit'
import { callFixture, cleanUp, fixtureServer, runAgent, startMcp, tempDir } from './mcp-harness.js'

afterEach(cleanUp)

/**
 * Whether `pid` still runs. A zombie does not: the server's child, orphaned when the group
 * is killed, waits as one for the machine's init to collect it.
 */
function running(pid: number): boolean {
  if (!exists(pid)) return false
  try {
    return !/^\d+ \(.*\) Z /s.test(readFileSync(`/proc/${pid}/stat`, 'utf8'))
  } catch {
    return false
  }
}

describe('an MCP server over stdio', () => {
  it('offers its tools as mcp__<server>__<tool> with their schemas; a name model APIs refuse, or a schema that is not JSON Schema, is skipped with a warning naming it', async () => {
    const { harness, warnings } = await startMcp({ servers: { srv: fixtureServer() } })
    const names = harness.ctx.tools.list().filter((name) => name.startsWith('mcp__'))
    expect(names).toEqual(['mcp__srv__echo', 'mcp__srv__note', 'mcp__srv__env', 'mcp__srv__crash', 'mcp__srv__hang', 'mcp__srv__garbage', 'mcp__srv__big', 'mcp__srv__picture', 'mcp__srv__fail', 'mcp__srv__family', 'mcp__srv__huge'])
    const echo = harness.ctx.tools.get('mcp__srv__echo')!
    expect(echo.description).toBe('Echo the text back.')
    // The 2020-12 dialect the server named is dropped; the schema itself is the server's.
    expect(echo.parameters).toEqual({ type: 'object', properties: { text: { type: 'string' } }, required: ['text'] })
    expect(echo.sideEffecting).toBe(false)
    expect(harness.ctx.tools.get('mcp__srv__note')!.sideEffecting).toBe(true)
    expect(warnings).toEqual([
      expect.stringMatching(/^MCP server "srv": tool mcp__srv__badschema skipped: tool "mcp__srv__badschema": its parameters are not a valid JSON Schema: /),
      expect.stringMatching(/^MCP server "srv": tool skipped: "bad name!" has characters model APIs do not accept/),
    ])
  })

  it('a read-only call runs unasked under --permission reject and its text reaches the model; isError stays an error; other content is summarised; a long result is cut in the middle', async () => {
    const results = await callFixture(
      [
        { tool: 'mcp__srv__echo', args: { text: 'hello' } },
        { tool: 'mcp__srv__fail', args: {} },
        { tool: 'mcp__srv__picture', args: {} },
        { tool: 'mcp__srv__big', args: {} },
      ],
      { maxOutputChars: 1000 },
      { default: 'reject' },
    )
    expect(results[0]).toEqual({ text: 'echo: hello', isError: false })
    expect(results[1]).toEqual({ text: 'it went wrong', isError: true })
    expect(results[2]).toEqual({ text: 'a caption\n[image: image/png, 9 bytes; not shown]', isError: false })
    expect(results[3]!.text.length).toBeLessThanOrEqual(1000)
    expect(results[3]!.text).toMatch(/^start x+\n… \(\d+ characters cut from the middle of the result\) …\nx+ end$/)
  })

  it('a side-effecting call under --permission reject is refused and the server never sees it; a rule naming the tool, or every tool of its server (mcp__srv__*), lets it through', async () => {
    const dir = await tempDir()
    const log = join(dir, 'calls.log')
    const calls = [{ tool: 'mcp__srv__note', args: { line: 'one' } }]
    const refused = await startMcp({ servers: { srv: fixtureServer({ CALL_LOG: log }) } }, { calls, approvals: { default: 'reject' } })
    const { results, agent } = await runAgent(refused)
    expect(results[0]!.isError).toBe(true)
    expect(results[0]!.text).toMatch(/mcp__srv__note/)
    expect(agent.session.events().flatMap((event) => (event.type === 'tool/result' && event.permission ? [event.permission.decision] : []))).toEqual(['reject'])
    expect(existsSync(log)).toBe(false)

    const allowed = await startMcp({ servers: { srv: fixtureServer({ CALL_LOG: log }) } }, { calls, approvals: { default: 'reject', allow: ['mcp__srv__note'] } })
    expect((await runAgent(allowed)).results[0]).toEqual({ text: 'noted', isError: false })
    expect(readFileSync(log, 'utf8')).toBe('one\n')
    const byServer = await startMcp({ servers: { srv: fixtureServer({ CALL_LOG: log }) } }, { calls, approvals: { default: 'reject', allow: ['mcp__srv__*'] } })
    expect((await runAgent(byServer)).results[0]).toEqual({ text: 'noted', isError: false })
    expect(readFileSync(log, 'utf8')).toBe('one\none\n')
  })

  it("a server's readOnlyHint is trusted only where the user's entry says readOnlyHints: true: otherwise a read-only tool is decided by the broker, so a deny rule or --permission reject holds", async () => {
    const calls = [{ tool: 'mcp__srv__echo', args: { text: 'ran' } }]
    const { readOnlyHints: _trusted, ...untrusted } = fixtureServer()
    for (const approvals of [{ default: 'reject' as const }, { default: 'allow' as const, deny: ['mcp__srv__echo'] }]) {
      const run = await startMcp({ servers: { srv: untrusted } }, { calls, approvals })
      const { results } = await runAgent(run)
      expect(results[0]!.isError, JSON.stringify(approvals)).toBe(true)
      expect(results[0]!.text, JSON.stringify(approvals)).not.toContain('ran')
    }
    const trusted = await startMcp({ servers: { srv: fixtureServer() } }, { calls, approvals: { default: 'reject' } })
    expect((await runAgent(trusted)).results[0]!.isError).toBe(false)
  })

  it('a deny or ask rule naming a trusted read-only tool (by name, mcp__srv__* or mcp__srv) wins over its readOnlyHint: the broker decides it', async () => {
    const calls = [{ tool: 'mcp__srv__echo', args: { text: 'ran' } }]
    for (const deny of ['mcp__srv__echo', 'mcp__srv__*', 'mcp__srv', 'mcp__srv__echo(*ran*)']) {
      const run = await startMcp({ servers: { srv: fixtureServer() } }, { calls, approvals: { default: 'allow', deny: [deny] } })
      expect(run.harness.ctx.tools.get('mcp__srv__echo')!.sideEffecting, deny).toBe(true)
      const { results } = await runAgent(run)
      expect(results[0]!.isError, deny).toBe(true)
      expect(results[0]!.text, deny).toContain(`the rule ${deny}`)
    }
    const asked = await startMcp({ servers: { srv: fixtureServer() } }, { calls, approvals: { default: 'allow', ask: ['mcp__srv__echo'] } })
    expect(asked.harness.ctx.tools.get('mcp__srv__echo')!.sideEffecting).toBe(true)
    // Another server's rule, or a bare *, leaves the hint alone.
    const other = await startMcp({ servers: { srv: fixtureServer() } }, { calls, approvals: { default: 'reject', deny: ['mcp__srvx', 'mcp__other__*', '*'] } })
    expect(other.harness.ctx.tools.get('mcp__srv__echo')!.sideEffecting).toBe(false)
    expect((await runAgent(other)).results[0]).toEqual({ text: 'echo: ran', isError: false })
  })

  it('the server gets the allow-listed environment and what its entry names, never the rest of dsh\'s environment', async () => {
    process.env.DSH_MCP_TEST_SECRET = 'hunter2'
    try {
      const results = await callFixture([{ tool: 'mcp__srv__env', args: {} }], { servers: { srv: fixtureServer({ GIVEN: 'yes' }) } })
      const names = results[0]!.text.split(' ')
      expect(names).toContain('GIVEN')
      expect(names).toContain('PATH')
      expect(names).not.toContain('DSH_MCP_TEST_SECRET')
    } finally {
      delete process.env.DSH_MCP_TEST_SECRET
    }
  })

  it('a server that crashes mid-call ends the call with its exit and last words; the next call starts it again, once, with one line saying so; a server that crashes again is reported, not restarted in a loop', async () => {
    const run = await startMcp(
      { servers: { srv: fixtureServer() } },
      {
        calls: [
          { tool: 'mcp__srv__crash', args: {} },
          { tool: 'mcp__srv__echo', args: { text: 'again' } },
          { tool: 'mcp__srv__crash', args: {} },
          { tool: 'mcp__srv__echo', args: { text: 'once more' } },
          { tool: 'mcp__srv__echo', args: { text: 'and again' } },
        ],
      },
    )
    const { results } = await runAgent(run)
    expect(results[0]!.isError).toBe(true)
    expect(results[0]!.text).toMatch(/^MCP server "srv": crash failed: the server exited with code 7: fixture: crashing on purpose$/)
    expect(results[1]).toEqual({ text: 'echo: again', isError: false })
    expect(results[2]!.text).toMatch(/^MCP server "srv": crash failed: the server exited with code 7/)
    for (const later of results.slice(3)) {
      expect(later.isError).toBe(true)
      expect(later.text).toMatch(/^MCP server "srv": echo failed: the server exited with code 7: fixture: crashing on purpose; it was restarted once already and is not restarted again \(restart dsh to try again\)$/)
    }
    expect(run.warnings.filter((line) => line.includes('starting it again'))).toEqual([
      'MCP server "srv" exited with code 7: fixture: crashing on purpose; starting it again for this call (once: if it stops again, it stays stopped)',
    ])
  })

  it('a server that never answers ends the call at callTimeoutMs; one that prints garbage or a message over 10 MB ends it at once', async () => {
    const hung = await callFixture([{ tool: 'mcp__srv__hang', args: {} }, { tool: 'mcp__srv__echo', args: { text: 'still here' } }], { callTimeoutMs: 300 })
    expect(hung[0]).toEqual({ text: 'MCP server "srv": hang failed: no answer to tools/call within 300 ms', isError: true })
    // A call that timed out is cancelled; the server goes on answering.
    expect(hung[1]).toEqual({ text: 'echo: still here', isError: false })
    const huge = await callFixture([{ tool: 'mcp__srv__huge', args: {} }], { callTimeoutMs: 600_000 })
    expect(huge[0]).toEqual({ text: 'MCP server "srv": huge failed: the server sent a message over 10 MB', isError: true })
    const garbage = await callFixture([{ tool: 'mcp__srv__garbage', args: {} }], { callTimeoutMs: 600_000 })
    expect(garbage[0]).toEqual({ text: 'MCP server "srv": garbage failed: the server wrote something that is not JSON-RPC on stdout', isError: true })
  })

  it('a cancelled turn ends a waiting call, the server is told (notifications/cancelled), nothing is left unhandled, and the server goes on answering', async () => {
    const unhandled: unknown[] = []
    const onUnhandled = (reason: unknown) => void unhandled.push(reason)
    process.on('unhandledRejection', onUnhandled)
    try {
      const dir = await tempDir()
      const log = join(dir, 'calls.log')
      const run = await startMcp({ servers: { srv: fixtureServer({ CALL_LOG: log }) }, callTimeoutMs: 600_000 }, { calls: [{ tool: 'mcp__srv__hang', args: {} }] })
      const agent = await run.harness.agent()
      // The server has the call once it logs it (a watch on its directory, not a wait of some length).
      const started = new Promise<void>((resolve) => {
        const watcher = watch(dir, () => {
          if (existsSync(log) && readFileSync(log, 'utf8').includes('hang started')) resolve(watcher.close())
        })
      })
      const turn = agent.followup('go')
      await started
      agent.cancel(new Error('the user pressed Ctrl-C'))
      await turn.catch(() => {})
      const answer = await run.harness.ctx.tools.get('mcp__srv__echo')!.execute({ text: 'after' }, { signal: new AbortController().signal, callId: 'after', agent })
      expect(answer).toEqual({ content: 'echo: after' })
      // The server reads its input in order: the cancellation came before the echo it answered.
      expect(readFileSync(log, 'utf8')).toBe('hang started\nhang cancelled\n')
      await new Promise((resolve) => setImmediate(resolve))
      expect(unhandled).toEqual([])
    } finally {
      process.off('unhandledRejection', onUnhandled)
    }
  })

  it('a server that will not start is one warning naming it, its tools absent, and the other servers work', async () => {
    const run = await startMcp(
      { servers: { broken: fixtureServer({}, ['--exit-at-start']), missing: { command: '/nonexistent/mcp-server' }, srv: fixtureServer() } },
      { calls: [{ tool: 'mcp__srv__echo', args: { text: 'fine' } }] },
    )
    expect(run.warnings.filter((line) => line.includes('did not start')).sort()).toEqual([
      'MCP server "broken" (the mcp entry) did not start: the server exited with code 3: fixture: refusing to start on purpose; its tools are left out',
      expect.stringMatching(/^MCP server "missing" \(the mcp entry\) did not start: .*ENOENT.*; its tools are left out$/),
    ])
    expect(run.harness.ctx.tools.list().some((name) => name.startsWith('mcp__broken__') || name.startsWith('mcp__missing__'))).toBe(false)
    expect((await runAgent(run)).results[0]).toEqual({ text: 'echo: fine', isError: false })
  })

  it('starting a server and listing its tools share one deadline: a server each of whose replies comes within startTimeoutMs, but not all of them, is left out naming the bound', async () => {
    // Four pages of tools, each answered 700 ms after it is asked for: every reply within 2000 ms, the whole list not.
    const run = await startMcp({ servers: { slow: fixtureServer({}, ['--slow-pages', '700']), srv: fixtureServer() }, startTimeoutMs: 2000 })
    expect(run.warnings.filter((line) => line.includes('did not start'))).toEqual([
      expect.stringMatching(/^MCP server "slow" \(the mcp entry\) did not start: it was not started with its tools listed within 2000 ms \(startTimeoutMs; it was at (initialize|tools\/list)\); its tools are left out$/),
    ])
    expect(run.harness.ctx.tools.list().filter((name) => name.startsWith('mcp__slow__'))).toEqual([])
    expect(run.harness.ctx.tools.list()).toContain('mcp__srv__echo')
  })

  it('stopping the plugin stops the server and every process it started', async () => {
    const run = await startMcp({ servers: { srv: fixtureServer() } }, { calls: [{ tool: 'mcp__srv__family', args: {} }] })
    const { results } = await runAgent(run)
    const pids = results[0]!.text.split(' ').map(Number)
    expect(pids).toHaveLength(2)
    for (const pid of pids) expect(running(pid)).toBe(true)
    await run.harness.dispose()
    for (const pid of pids) expect(running(pid)).toBe(false)
  })
})
