/**
 * The page `dsh ui` serves: one static document with its script inline (no build step, no
 * network but its own server). Everything from a session is put in the document with
 * `textContent`, never as markup, control characters shown as their symbols. It lists the
 * runs by their prompt, each a link of its own (`#run=ID`: the page opens the run its
 * address names), shows one run as a tree and a timeline of labelled bars, and one session's transcript with each
 * delegation linked to its child and each decision with who made it, by which rule, when;
 * it refreshes what changed when the server's event stream says so. Served by a running
 * `dsh run --ui`, it also lists the approval requests waiting now, with their time left,
 * and answers them (POST with the token in an Authorization header, never in the URL).
 */
export const PAGE = `<!doctype html>
<html lang="en">
<head>
<meta charset="utf-8">
<title>dsh ui</title>
<style>
  body { font: 14px/1.4 system-ui, sans-serif; margin: 0; display: grid; grid-template-columns: 22rem 1fr; height: 100vh; color: #1d1d1f; }
  aside { border-right: 1px solid #ddd; overflow: auto; }
  main { overflow: auto; padding: 0 1rem 2rem; }
  h1 { font-size: 1rem; margin: .8rem 1rem; }
  h2 { font-size: .95rem; margin: 1rem 0 .4rem; }
  .run { display: block; padding: .4rem 1rem; cursor: pointer; border-bottom: 1px solid #eee; color: inherit; text-decoration: none; }
  .run .prompt { overflow-wrap: anywhere; }
  .run:hover, .run.open { background: #f2f5fb; }
  .meta { color: #666; font-size: 12px; }
  .state { display: inline-block; min-width: 5.5rem; font-size: 12px; border-radius: 3px; padding: 0 .3rem; margin-right: .4rem; text-align: center; background: #eee; }
  .state.running { background: #dbe9ff; } .state.completed { background: #ddf3e1; } .state.error, .state.lost { background: #fbdcdc; }
  .state.aborted { background: #f6e7c8; } .state.elsewhere { background: #ece6f7; }
  .state.waiting-for-approval { background: #ffd36b; font-weight: 600; } .state.queued { background: #e4e4e4; border: 1px dashed #888; }
  .state.stopped-by-budget { background: #f3c6e8; } .state.not-started { background: #eee; color: #777; }
  #approvals:empty { display: none; }
  #approvals { border: 2px solid #e0a800; background: #fff8e1; border-radius: 4px; padding: .4rem .8rem; margin: .8rem 0; }
  .request { padding: .4rem 0; border-bottom: 1px solid #f0dca0; } .request:last-child { border-bottom: 0; }
  .request .path { font-weight: 600; } .subject { font-family: ui-monospace, monospace; white-space: pre-wrap; word-break: break-all; }
  .request button { margin: .3rem .4rem 0 0; font: inherit; padding: .15rem .6rem; cursor: pointer; }
  .request .error { color: #a33; } .decision { color: #444; font-size: 12px; } .decision.reject { color: #a33; }
  .entry.approval { border-color: #e0a800; } .entry.hook { border-color: #7a5cc0; }
  ul.tree { list-style: none; padding-left: 1.2rem; margin: 0; } ul.tree.top { padding-left: 0; }
  .node { padding: .15rem .3rem; cursor: pointer; border-radius: 3px; } .node:hover, .node.open { background: #f2f5fb; }
  .timeline { position: relative; border-left: 1px solid #ccc; }
  .bar-row { display: grid; grid-template-columns: 18rem 1fr; align-items: center; min-height: 16px; margin: 2px 0; }
  .bar-label { font-size: 12px; white-space: nowrap; overflow: hidden; text-overflow: ellipsis; padding-right: .5rem; }
  .bar-track { position: relative; height: 16px; }
  .bar { position: absolute; height: 12px; top: 2px; border-radius: 2px; background: #8fb3e8; min-width: 2px; }
  .bar.running { background: #4b86db; } .bar.error { background: #d46a6a; } .bar.aborted { background: #d9a94a; }
  .bar.waiting-for-approval { background: #e0a800; } .bar.queued { background: repeating-linear-gradient(45deg, #bbb 0 4px, #eee 4px 8px); } .bar.stopped-by-budget { background: #c060a8; } .bar.not-started { background: #ccc; }
  .entry { border-left: 3px solid #ddd; padding: .3rem .6rem; margin: .4rem 0; white-space: pre-wrap; word-break: break-word; }
  .entry.user { border-color: #7aa7e8; } .entry.assistant { border-color: #7ac68d; } .entry.tool-call { border-color: #c9a64a; }
  .entry.tool-result { border-color: #b9b9b9; } .entry.tool-result.error { border-color: #d46a6a; } .entry.turn-end { border-color: #444; }
  a.child { cursor: pointer; color: #1a5fd0; text-decoration: underline; }
  .problems { color: #a33; font-size: 12px; padding: .4rem 1rem; }
</style>
</head>
<body>
<aside><h1>dsh ui</h1><div id="runs" data-testid="runs"></div><div id="problems" class="problems"></div></aside>
<main>
  <section id="approvals" data-testid="approvals" aria-live="polite"></section>
  <h2 id="run-title">Choose a run</h2>
  <ul id="tree" class="tree top" data-testid="tree"></ul>
  <h2>Timeline</h2>
  <div id="timeline" class="timeline" data-testid="timeline"></div>
  <h2 id="transcript-title">Transcript</h2>
  <div id="transcript" data-testid="transcript"></div>
</main>
<script>
(() => {
  const token = new URLSearchParams(location.search).get('token') || ''
  const api = (path) => fetch(path + (path.includes('?') ? '&' : '?') + 'token=' + encodeURIComponent(token)).then((r) => (r.ok ? r.json() : null))
  // Control characters (escape sequences included) are shown as their symbols, never passed on.
  const shown = (text) => String(text).replace(/[\\u0000-\\u0008\\u000b-\\u001f\\u007f]/g, (c) => (c === '\\u007f' ? '\\u2421' : String.fromCharCode(0x2400 + c.charCodeAt(0))))
  const el = (tag, attrs, ...children) => {
    const node = document.createElement(tag)
    for (const [key, value] of Object.entries(attrs || {})) {
      if (key === 'class') node.className = value
      else if (key === 'on') for (const [event, handler] of Object.entries(value)) node.addEventListener(event, handler)
      else node.setAttribute(key, String(value))
    }
    for (const child of children) if (child !== undefined && child !== null && child !== false) node.append(typeof child === 'string' ? document.createTextNode(shown(child)) : child)
    return node
  }
  const seconds = (from, to) => (((to ?? Date.now()) - from) / 1000).toFixed(1) + ' s'
  const tokens = (n) => n.inputTokens || n.outputTokens ? n.inputTokens + ' in / ' + n.outputTokens + ' out' : ''
  let openRun = null
  let openSession = null

  // Each run has an address of its own: this page with #run=ID (the token stays in the query).
  const RUN_LINK = '#run='
  const runLink = (id) => RUN_LINK + encodeURIComponent(id)
  const runInAddress = () => {
    if (!location.hash.startsWith(RUN_LINK)) return null
    try { return decodeURIComponent(location.hash.slice(RUN_LINK.length)) || null } catch { return null }
  }

  async function loadRuns() {
    const body = await api('/api/runs')
    if (!body) return
    const list = document.getElementById('runs')
    list.replaceChildren(...body.runs.map((run) => el('a', { class: 'run' + (run.id === openRun ? ' open' : ''), href: runLink(run.id), 'data-run': run.id, 'data-state': run.state },
      el('span', { class: 'state ' + run.state }, STATE_WORDS[run.state] || run.state), el('span', { class: 'prompt', 'data-prompt': '' }, run.prompt || run.label || run.id),
      el('div', { class: 'meta' }, (run.label && run.prompt ? '"' + run.label + '" · ' : '') + run.id + ' · ' + new Date(run.startedAt).toLocaleString() + ' · ' + seconds(run.startedAt, run.endedAt) + ' · ' + run.children + ' children' + (tokens(run) ? ' · ' + tokens(run) : '')))))
    document.getElementById('problems').replaceChildren(...body.unreadable.map((p) => el('div', {}, p.file + ': ' + p.problem)))
  }

  const STATE_WORDS = { 'waiting-for-approval': 'waiting for approval', 'stopped-by-budget': 'stopped by budget', 'not-started': 'not started' }
  function treeItem(node) {
    const state = node.storedAt && !node.waiting ? 'elsewhere' : node.state
    const who = [node.helper, node.provider || node.origin].filter(Boolean).join(' · ')
    const where = node.storedAt ? 'stored elsewhere: ' + node.storedAt : node.call ? 'call ' + node.call : node.task ? 'task ' + node.task + (node.state === 'queued' ? ' · waiting for a slot for ' + seconds(node.startedAt) : '') : seconds(node.startedAt, node.endedAt) + (tokens(node) ? ' · ' + tokens(node) : '')
    const line = el('div', { class: 'node' + (node.id === openSession ? ' open' : ''), 'data-node': node.id, 'data-state': node.state, on: { click: (event) => { event.stopPropagation(); if (!node.storedAt && !node.task && !node.call) openTranscript(node.id) } } },
      el('span', { class: 'state ' + state }, STATE_WORDS[node.state] || node.state), (who ? who + ' ' : '') + (node.label ? '"' + node.label + '"' : node.id),
      el('span', { class: 'meta' }, '  ' + where),
      node.waiting ? el('div', { class: 'meta', 'data-waiting': node.waiting.map((w) => w.id).join(' ') }, 'waits for an answer: ' + node.waiting.map((w) => w.tool + ' ' + w.display).join('; ')) : null,
      node.diagnostic ? el('div', { class: 'meta', 'data-diagnostic': '' }, node.diagnostic) : null,
      node.truncated ? el('div', { class: 'meta', 'data-truncated': '' }, node.truncated) : null)
    const item = el('li', {}, line)
    if (node.children.length) item.append(el('ul', { class: 'tree' }, ...node.children.map(treeItem)))
    return item
  }

  function timeline(root) {
    const all = []
    const walk = (node) => { all.push(node); node.children.forEach(walk) }
    walk(root)
    const start = Math.min(...all.map((n) => n.startedAt))
    const end = Math.max(...all.map((n) => n.endedAt ?? Date.now()))
    const span = Math.max(1, end - start)
    // Each bar says whose it is (helper, label) and how it stands, beside it, not only on hover.
    const barLabel = (n) => [n.helper, n.label ? '"' + n.label + '"' : n.depth === 0 ? 'root' : n.id].filter(Boolean).join(' ') + ' · ' + (STATE_WORDS[n.state] || n.state)
    document.getElementById('timeline').replaceChildren(...all.map((n) => el('div', { class: 'bar-row', title: barLabel(n) + (n.diagnostic ? ': ' + n.diagnostic : '') },
      el('span', { class: 'bar-label', 'data-bar-label': n.id, style: 'padding-left:' + n.depth * 0.8 + 'rem' }, barLabel(n)),
      el('div', { class: 'bar-track' },
        el('div', { class: 'bar ' + n.state, 'data-bar': n.id, style: 'left:' + ((n.startedAt - start) / span * 100).toFixed(2) + '%;width:' + (((n.endedAt ?? Date.now()) - n.startedAt) / span * 100).toFixed(2) + '%' })))))
  }

  async function openRunView(id) {
    // Another run: its own transcript, not the last one's.
    if (id !== openRun) openSession = null
    openRun = id
    const root = await api('/api/tree/' + encodeURIComponent(id))
    if (!root) return
    document.getElementById('run-title').textContent = 'Run ' + (root.label || root.id)
    document.getElementById('tree').replaceChildren(treeItem(root))
    timeline(root)
    for (const node of document.querySelectorAll('.run')) node.classList.toggle('open', node.dataset.run === id)
    if (!openSession) openTranscript(id)
  }

  async function openTranscript(id) {
    openSession = id
    const body = await api('/api/transcript/' + encodeURIComponent(id))
    if (!body) return
    const h = body.header
    document.getElementById('transcript-title').textContent = 'Transcript of ' + (h.label ? '"' + h.label + '" ' : '') + h.id + (h.provider ? ' (' + h.provider + ')' : '') + (body.truncated ? ' (' + body.truncated + ')' : '')
    document.getElementById('transcript').replaceChildren(...body.entries.map((entry) => {
      const box = el('div', { class: 'entry ' + entry.kind + (entry.error ? ' error' : ''), 'data-kind': entry.kind })
      if (entry.kind === 'user') box.append(el('b', {}, 'user: '), entry.text)
      if (entry.kind === 'assistant') box.append(el('b', {}, 'assistant: '), entry.text, entry.usage ? el('div', { class: 'meta' }, tokens(entry.usage)) : null)
      if (entry.kind === 'tool-call') box.append(el('b', {}, 'call ' + entry.name + ' '), el('span', { class: 'meta' }, entry.callId), '\\n' + entry.args)
      if (entry.kind === 'tool-result') {
        box.append(el('b', {}, 'result of ' + entry.name + (entry.error ? ' (error)' : '') + ' '), el('span', { class: 'meta' }, entry.callId))
        if (entry.permission) box.append(decisionLine(entry.permission))
        if (entry.child) box.append(el('div', {}, entry.childStoredAt ? el('span', { class: 'meta', 'data-child': entry.child }, 'child ' + entry.child + ' (' + entry.childProvider + '), stored elsewhere: ' + entry.childStoredAt)
          : el('a', { class: 'child', 'data-child': entry.child, on: { click: () => openTranscript(entry.child) } }, 'open child ' + entry.child + ' (' + entry.childProvider + ')')))
        box.append('\\n' + entry.text)
      }
      if (entry.kind === 'turn-end') box.append(el('b', {}, 'turn ended ' + entry.reason), entry.error ? ': ' + entry.error : '')
      if (entry.kind === 'approval') box.append(el('b', {}, 'approval for ' + entry.path.join(' › ')), el('span', { class: 'meta' }, entry.child ? ' ' + entry.child : ''), '\\n' + entry.tool + ': ' + entry.subject, decisionLine(entry.permission))
      if (entry.kind === 'hook') box.append(el('b', {}, entry.event + ' hook "' + entry.command + '"'), el('span', { class: 'meta' }, entry.callId ? ' ' + entry.callId : ''), el('div', { class: 'decision' + (entry.decision ? ' ' + entry.decision : ''), 'data-hook-decision': entry.decision || '' }, hookLine(entry)))
      return box
    }))
    for (const node of document.querySelectorAll('.node')) node.classList.toggle('open', node.dataset.node === id)
  }

  /** How a hook's run ended, as dsh sessions show says it: exit 2, 12 ms, block (and its note). */
  function hookLine(h) {
    const parts = [typeof h.exitCode === 'number' ? 'exit ' + h.exitCode : 'no exit code', h.durationMs + ' ms']
    if (h.decision) parts.push(h.decision)
    return parts.join(', ') + (h.note ? ': ' + h.note : '')
  }

  const DECISION_WORDS = { 'allow-once': 'allowed once', 'allow-always': 'allowed always in this run', reject: 'rejected' }
  const SOURCE_WORDS = { user: 'answered', rule: 'by a rule', default: 'by the default', remembered: 'an earlier answer', timeout: 'timed out', cancelled: 'withdrawn', limit: 'too many pending', replay: 'replayed' }
  /** A decision: what, who decided, what kind of decision, the rule, when, and why a rejection. */
  function decisionLine(p) {
    const parts = [(DECISION_WORDS[p.decision] || p.decision) + ' by ' + p.by]
    if (p.source) parts.push(SOURCE_WORDS[p.source] || p.source)
    if (p.rule) parts.push('rule ' + p.rule)
    if (typeof p.at === 'number') parts.push(new Date(p.at).toLocaleTimeString())
    return el('div', { class: 'decision ' + p.decision, 'data-decision': p.decision, 'data-source': p.source || '' }, 'decision: ' + parts.join(' · ') + (p.decision === 'reject' && p.reason ? ': ' + p.reason : ''))
  }

  // Approval requests waiting now (served by dsh run --ui); the server's clock, so time left is right on any browser clock.
  let skew = 0
  let approvals = { live: false, answers: false, pending: [] }
  const ANSWERS = [['allow-once', 'Allow once'], ['allow-always', 'Allow always in this run'], ['reject', 'Reject']]
  const left = (a) => { const s = Math.max(0, Math.round((a.expiresAt - (Date.now() + skew)) / 1000)); return Math.floor(s / 60) + ':' + String(s % 60).padStart(2, '0') + ' left' }
  async function loadApprovals() {
    const body = await api('/api/approvals')
    if (!body) return
    skew = body.now - Date.now()
    approvals = body
    const box = document.getElementById('approvals')
    if (!body.pending.length) return box.replaceChildren()
    box.replaceChildren(el('h2', {}, body.pending.length === 1 ? 'One request waits for an answer' : body.pending.length + ' requests wait for an answer'), ...body.pending.map((a) => {
      const status = el('div', { class: 'error' })
      const buttons = a.answerable ? ANSWERS.map(([decision, words]) => el('button', { type: 'button', 'data-answer': decision, on: { click: () => answer(a.id, decision, status) } }, words))
        : [el('div', { class: 'meta' }, 'asked of ' + (body.answers ? 'another front-end' : 'the terminal') + ': answer it there')]
      return el('div', { class: 'request', 'data-approval': a.id },
        el('div', { class: 'path' }, a.path.join(' › ')),
        el('div', {}, 'wants to run ' + a.tool + ': ', el('span', { class: 'subject' }, a.display)),
        el('div', { class: 'meta' }, (a.policy === 'ask' ? 'asked because the rule ' + (a.rule || 'of its policy') + ' says ask' : 'no rule decided it') + ' · ' + a.id + ' · ', el('span', { class: 'left' }, left(a)), ' before it is rejected'),
        ...buttons, status)
    }))
  }
  async function answer(id, decision, status) {
    for (const button of document.querySelectorAll('[data-approval="' + CSS.escape(id) + '"] button')) button.disabled = true
    const response = await fetch('/api/approvals/' + encodeURIComponent(id), { method: 'POST', headers: { authorization: 'Bearer ' + token, 'content-type': 'application/json' }, body: JSON.stringify({ decision }) }).catch(() => null)
    if (!response || !response.ok) {
      status.textContent = shown('not answered: ' + (response ? ((await response.json().catch(() => ({}))).error || response.status) : 'the run is gone'))
      return
    }
    await loadApprovals()
  }
  setInterval(() => { for (const a of approvals.pending) { const span = document.querySelector('[data-approval="' + CSS.escape(a.id) + '"] .left'); if (span) span.textContent = left(a) } }, 1000)

  let pending = null
  const changed = new Set()
  const events = new EventSource('/api/events?token=' + encodeURIComponent(token))
  events.addEventListener('changed', (event) => {
    changed.add(JSON.parse(event.data).id)
    clearTimeout(pending)
    pending = setTimeout(async () => {
      const ids = new Set(changed)
      changed.clear()
      await loadRuns()
      if (openRun) await openRunView(openRun)
      if (openSession && ids.has(openSession)) await openTranscript(openSession)
    }, 100)
  })
  // The running process: a request came or went, a child queued, started or ended.
  let livePending = null
  events.addEventListener('live', () => {
    clearTimeout(livePending)
    livePending = setTimeout(async () => {
      await loadApprovals()
      if (openRun) await openRunView(openRun)
    }, 30)
  })
  window.addEventListener('hashchange', () => { const id = runInAddress(); if (id) openRunView(id) })
  loadRuns()
  loadApprovals()
  // Opened at a run's address: show that run.
  if (runInAddress()) openRunView(runInAddress())
})()
</script>
</body>
</html>
`
