/* Hookbot console: the message trace (GET /api/trace, /api/trace/:id; docs/CONSOLE.md "Message trace").
 * A drawer beside the chat lists the last messages' traces (blocked ones marked) and shows one: the
 * interceptor review, each plugin hook with its verdict or change and its time, the replies and actions
 * sent back, what was skipped. A click on a message in the chat opens its trace. The Interception tab's
 * "Recent verdicts" come from the same traces (interception.js calls pollRecentVerdicts); console.js calls
 * wireTrace. */

import { api, Token } from './api.js';
import { $, badge, h } from './dom.js';
import { enc } from './format.js';
import { Poller } from './poller.js';
import { chat } from './state.js';

const traceView = { open: false, poller: null, selected: null };

/** The badge tone of each kind of step (the badge says the kind). */
const STEP_TONES = { review: 'info', hook: '', verdict: 'accent', delivered: 'ok', action: 'warn', sent: 'ok', skipped: 'warn', error: 'danger' };

function traceTime(ms) {
  return new Date(ms).toLocaleTimeString([], { hour: '2-digit', minute: '2-digit', second: '2-digit' });
}

function traceVerdictBadge(trace) {
  if (trace.blocked) return badge('blocked', 'danger');
  if (trace.verdict && /^text replaced|^changed/.test(trace.verdict)) return badge('changed', 'warn');
  if (trace.verdict) return badge('allowed', 'ok');
  return badge('no verdict', '');
}

/** One row of a trace list (the drawer's, the Interception tab's recent verdicts). */
function traceRow(trace) {
  const row = h('li', { class: `trace-row${trace.blocked ? ' blocked' : ''}`, dataset: { traceId: String(trace.id), mid: trace.messageId || '' } },
    h('button', { type: 'button', class: 'trace-row-button', on: { click: () => openTrace(String(trace.id)) } },
      h('span', { class: 'trace-row-time muted small', text: traceTime(trace.time) }),
      h('span', { class: 'trace-row-from', text: trace.from }),
      h('span', { class: 'trace-row-text', text: trace.text }),
      traceVerdictBadge(trace)));
  if (trace.blocked && (trace.reason || trace.decidedBy)) {
    row.append(h('div', { class: 'trace-row-reason small' },
      trace.decidedBy ? h('strong', { text: trace.decidedBy }) : null, trace.decidedBy && trace.reason ? ': ' : '', trace.reason || ''));
  }
  return row;
}

/** A trace in full: what the message was, then every step with its time. */
function renderTraceDetail(trace) {
  const box = $('#trace-detail');
  if (!trace) { box.replaceChildren(h('p', { class: 'muted small', text: 'Pick a trace, or click a message in the chat.' })); return; }
  const facts = h('dl', { class: 'trace-facts' },
    h('dt', { text: 'From' }), h('dd', { text: trace.from }),
    h('dt', { text: 'Conversation' }), h('dd', { text: trace.cid }),
    h('dt', { text: 'Message id' }), h('dd', { text: trace.messageId || '— (never delivered)' }),
    h('dt', { text: 'Verdict' }), h('dd', {}, traceVerdictBadge(trace), ' ', trace.verdict || 'none (nothing reviewed or moderated it)'),
    trace.blocked ? h('dt', { text: 'Why' }) : null,
    trace.blocked ? h('dd', { class: 'trace-reason' }, trace.decidedBy ? h('strong', { class: 'trace-decided-by', text: trace.decidedBy }) : null,
      trace.decidedBy ? ': ' : '', trace.reason || '(no reason given)') : null,
    h('dt', { text: 'When' }), h('dd', { text: new Date(trace.time).toLocaleString() }));
  const steps = h('ol', { class: 'trace-steps' }, (trace.steps || []).map((step) => {
    return h('li', { class: `trace-step ${step.kind}`, dataset: { kind: step.kind } },
      h('span', { class: 'trace-step-at muted small', text: `+${step.at.toFixed(step.at < 10 ? 2 : 1)} ms` }),
      badge(step.kind, Object.hasOwn(STEP_TONES, step.kind) ? STEP_TONES[step.kind] : ''),
      step.plugin ? h('span', { class: 'trace-step-plugin', text: step.plugin }) : null,
      step.hook ? h('code', { class: 'trace-step-hook', text: step.hook }) : null,
      step.micros != null ? h('span', { class: 'trace-step-time muted small', text: step.micros >= 1000 ? `${(step.micros / 1000).toFixed(1)} ms` : `${step.micros} µs` }) : null,
      h('span', { class: 'trace-step-text', text: step.text }));
  }));
  box.replaceChildren(
    h('h3', { class: 'trace-title', text: `“${trace.text}”` }),
    facts,
    h('h4', { class: 'subhead', text: 'Path' }),
    steps,
    trace.dropped ? h('p', { class: 'muted small', text: `${trace.dropped} more steps were not kept.` }) : null);
}

function traceNotice(text) {
  const notice = $('#trace-error');
  notice.textContent = text;
  notice.hidden = !text;
}

async function pollTraces() {
  if (!traceView.open) return;
  if (!Token.get()) { traceNotice('The trace needs the admin token (Set token, top right).'); return; }
  try {
    const list = await api(`/api/trace?limit=100${$('#trace-blocked-only').checked ? '&blocked=1' : ''}`, { admin: true });
    const traces = (list && list.traces) || [];
    $('#trace-count').textContent = `${traces.length} of the last ${list ? list.capacity : '?'} messages`;
    $('#trace-list').replaceChildren(...traces.map(traceRow));
    for (const row of document.querySelectorAll('#trace-list .trace-row')) row.classList.toggle('selected', row.dataset.traceId === traceView.selected);
    $('#trace-empty').hidden = traces.length > 0;
    traceNotice('');
  } catch (error) {
    traceNotice(`Could not read the traces: ${error.reason || error.message}`);
  }
}

function showTraceDrawer(show) {
  traceView.open = show;
  $('#trace-drawer').hidden = !show;
  $('#trace-button').setAttribute('aria-pressed', String(show));
  if (show) traceView.poller.start(); else traceView.poller.stop();
}

/** Opens the trace with this message id or number. */
async function openTrace(id) {
  if (!traceView.open) showTraceDrawer(true);
  traceView.selected = id;
  if (!Token.get()) { traceNotice('The trace needs the admin token (Set token, top right).'); return; }
  try {
    const trace = await api(`/api/trace/${enc(id)}`, { admin: true });
    traceView.selected = String(trace.id);
    renderTraceDetail(trace);
    for (const row of document.querySelectorAll('#trace-list .trace-row')) row.classList.toggle('selected', row.dataset.traceId === traceView.selected);
    traceNotice('');
  } catch (error) {
    renderTraceDetail(null);
    traceNotice(error.status === 404 ? `No trace for this message: ${error.reason}` : `Could not read the trace: ${error.reason || error.message}`);
  }
}

/** A message of the chat: by its id, or (a message refused before delivery has none) the newest trace of the
 *  same sender and text in the open conversation. */
async function openTraceForMessage(node) {
  if (node.dataset.mid) { await openTrace(node.dataset.mid); return; }
  if (!traceView.open) showTraceDrawer(true);
  const text = ($('.message-text', node) || {}).textContent || '';
  try {
    const list = await api(`/api/trace?limit=100&cid=${enc(chat.current || '')}`, { admin: true });
    const found = ((list && list.traces) || []).find((t) => t.from === node.dataset.from && t.text === text);
    if (found) await openTrace(String(found.id));
    else { renderTraceDetail(null); traceNotice('No trace for this message: it was not sent, or is older than the traces kept.'); }
  } catch (error) {
    traceNotice(`Could not read the traces: ${error.reason || error.message}`);
  }
}

/** The Interception tab's recent verdicts (GET /api/trace?verdicts=1). */
export async function pollRecentVerdicts() {
  const box = $('#recent-verdicts');
  if (!box || !Token.get()) return;
  const list = await api('/api/trace?verdicts=1&limit=20', { admin: true });
  const traces = (list && list.traces) || [];
  const table = h('table', { class: 'verdict-table' },
    h('thead', {}, h('tr', {}, ['Time', 'From', 'Message', 'Verdict', 'Plugin', 'Reason'].map((title) => h('th', { text: title })))),
    h('tbody', {}, traces.map((t) => h('tr', { class: t.blocked ? 'blocked' : '', dataset: { traceId: String(t.id) }, title: 'Open its trace', on: { click: () => openTrace(String(t.id)) } },
      h('td', { text: traceTime(t.time) }), h('td', { text: t.from }), h('td', { class: 'verdict-message', text: t.text }),
      h('td', {}, traceVerdictBadge(t)), h('td', { text: t.decidedBy || '—' }), h('td', { text: t.reason || (t.blocked ? '' : t.verdict || '') })))));
  box.replaceChildren(traces.length ? table : h('p', { class: 'muted small', text: 'No verdicts yet: messages the bot reviews or moderates appear here.' }));
}

export function wireTrace() {
  traceView.poller = new Poller(pollTraces, 2000);
  $('#trace-button').addEventListener('click', () => showTraceDrawer(!traceView.open));
  $('#trace-close').addEventListener('click', () => showTraceDrawer(false));
  $('#trace-blocked-only').addEventListener('change', pollTraces);
  $('#messages').addEventListener('click', (event) => {
    const node = event.target.closest('.message');
    if (!node || node.classList.contains('system') || event.target.closest('button, a, video, audio, input')) return;
    if (window.getSelection && String(window.getSelection())) return; // selecting text is not a click
    openTraceForMessage(node);
  });
  renderTraceDetail(null);
}
