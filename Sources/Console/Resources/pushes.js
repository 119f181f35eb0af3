// Hookbot console: the last pushes beside the chat's members and the push counters of the Interception tab
// (GET /api/pushes).

import { api, Token } from './api.js';
import { $, avatar, badge, h } from './dom.js';
import { formatNumber, formatTime } from './format.js';
import { statTile } from './interception.js';
import { chat } from './state.js';

const PUSH_KEEP = 200;
/** The badge tone of each outcome a push can have; a known outcome shows as its name ("device gone"). */
const PUSH_TONES = { delivered: 'ok', retry: 'warn', device_gone: 'danger', rejected: 'danger', expired: 'danger', dropped: 'danger' };

export const pushesView = { after: 0, entries: [], enabled: null, reason: '', providers: {}, poller: null };

/** Reads the pushes recorded since the last poll (every push of every conversation; the panel shows the open one's). */
export async function pollPushes() {
  if (!Token.get()) { renderPushes(); return; }
  try {
    const data = await api(`/api/pushes?${new URLSearchParams({ after: String(pushesView.after) })}`, { admin: true });
    pushesView.enabled = !!data.enabled;
    pushesView.reason = data.reason || '';
    pushesView.providers = data.providers || {};
    if (typeof data.next === 'number' && data.next < pushesView.after) { pushesView.after = 0; pushesView.entries = []; } // a new server
    const entries = Array.isArray(data.entries) ? data.entries : [];
    pushesView.entries = [...pushesView.entries, ...entries].slice(-PUSH_KEEP);
    if (typeof data.next === 'number') pushesView.after = data.next;
  } catch (error) {
    if (error.status !== 401) pushesView.reason = `Could not read the pushes: ${error.reason}`;
  }
  renderPushes();
}

export function renderPushes() {
  const list = $('#push-list');
  const note = $('#push-note');
  const count = $('#push-count');
  if (!Token.get()) {
    list.replaceChildren();
    count.textContent = '';
    note.textContent = 'Showing what offline members were pushed needs the admin token.';
    return;
  }
  if (pushesView.enabled === false) {
    list.replaceChildren();
    count.textContent = '';
    note.textContent = pushesView.reason;
    return;
  }
  const cid = chat.current;
  const shown = pushesView.entries.filter((entry) => entry.cid === cid).reverse();
  count.textContent = shown.length ? String(shown.length) : '';
  note.textContent = shown.length ? '' : (cid ? 'No push for this conversation yet: members who are offline and have a device get one per message.' : 'Open a conversation to see its pushes.');
  list.replaceChildren(...shown.map((entry) => {
    const known = Object.hasOwn(PUSH_TONES, entry.outcome);
    const [label, tone] = known ? [entry.outcome.replace('_', ' '), PUSH_TONES[entry.outcome]] : [entry.outcome, 'info'];
    return h('li', { class: 'push-item', dataset: { receiver: entry.receiver, outcome: entry.outcome, seq: String(entry.seq) } },
      h('div', { class: 'push-line' }, avatar(entry.receiver, true), h('span', { class: 'member-name', text: entry.receiver }),
        badge(entry.provider, 'info'), badge(label, tone), entry.badge != null ? badge(`badge ${entry.badge}`, 'accent') : null),
      entry.title ? h('div', { class: 'push-title', text: entry.title }) : null,
      h('div', { class: 'push-body', text: entry.body != null ? entry.body : '(no text: a background push)' }),
      h('div', { class: 'push-meta', text: [formatTime(entry.time, true), `device ${entry.device}`, entry.attempts > 1 ? `attempt ${entry.attempts}` : '',
        entry.reason || ''].filter(Boolean).join(' · '), title: `message ${entry.messageID}` }));
  }));
}

export function renderPushStats() {
  const node = $('#push-stats');
  if (pushesView.enabled === false) { node.replaceChildren(h('p', { class: 'notice info', text: pushesView.reason })); return; }
  const providers = Object.entries(pushesView.providers || {}).sort(([a], [b]) => a.localeCompare(b));
  if (!providers.length) { node.replaceChildren(h('p', { class: 'muted', text: 'No push attempt yet.' })); return; }
  const failed = (counts) => (counts.rejected || 0) + (counts.device_gone || 0) + (counts.expired || 0);
  node.replaceChildren(...providers.map(([name, counts]) => statTile(name, counts.delivered || 0,
    `sent · ${formatNumber(failed(counts))} failed · ${formatNumber(counts.dropped || 0)} dropped · ${formatNumber(counts.retry || 0)} retried`,
    failed(counts) || counts.dropped ? 'bad' : '')));
}
