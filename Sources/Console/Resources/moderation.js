// Hookbot console: the Moderation tab. Lists what the moderation plugins recorded through
// plugins/lib/modlog.lua (GET /api/moderation/actions, filtered by the server) and undoes an action
// (POST /api/moderation/actions/{id}/undo: the action's undo command run as the console).
// An ES module: console.js calls wireModeration and runs its poller while the tab is shown.

import { api, errorText } from './api.js';
import { $, badge, h, showFormError, toast } from './dom.js';
import { enc, formatTime, plural } from './format.js';
import { Poller } from './poller.js';

export const moderationView = {
  poller: null,
  /** Plugins and action names seen, for the filter menus. */
  plugins: new Set(),
  actions: new Set(),
};

/** The query of the filter form. */
function moderationQuery() {
  const query = new URLSearchParams();
  const value = (id) => $(id).value.trim();
  for (const [key, id] of [['plugin', '#mod-plugin'], ['action', '#mod-action'], ['target', '#mod-target'], ['cid', '#mod-cid'],
    ['rule', '#mod-rule'], ['dry_run', '#mod-dry'], ['q', '#mod-q']]) {
    if (value(id)) query.set(key, value(id));
  }
  const range = Number($('#mod-since').value);
  if (range > 0) query.set('since', String(Math.floor(Date.now() / 1000) - range));
  query.set('limit', '200');
  return query.toString();
}

async function pollModeration() {
  const error = $('#mod-error');
  let view;
  try {
    view = await api(`/api/moderation/actions?${moderationQuery()}`, { admin: true });
  } catch (failure) {
    showFormError(error, `The moderation log could not be loaded: ${errorText(failure)}`);
    return;
  }
  showFormError(error, '');
  addOptions($('#mod-plugin'), moderationView.plugins, view.plugins);
  addOptions($('#mod-action'), moderationView.actions, view.actionNames);
  $('#mod-summary').textContent = `${plural(view.total, 'action')} match; ${view.actions.length < view.total ? `the newest ${view.actions.length} shown` : 'all shown'}. Refreshed every 2 s.`;
  renderModeration(view.actions);
}

/** Adds the names not yet in a filter menu. */
function addOptions(select, seen, names) {
  for (const name of names || []) {
    if (seen.has(name)) continue;
    seen.add(name);
    select.append(h('option', { value: name, text: name }));
  }
}

function renderModeration(actions) {
  const rows = $('#mod-rows');
  $('#mod-empty').hidden = actions.length > 0;
  // Rows are rebuilt, but a row whose undo is under way keeps its button state.
  const busy = new Set([...rows.querySelectorAll('tr[data-busy]')].map((row) => row.dataset.id));
  rows.replaceChildren(...actions.map((entry) => moderationRow(entry, busy.has(entry.id))));
}

function moderationRow(entry, busy) {
  const when = h('td', { class: 'nowrap', text: formatTime(entry.at * 1000, true), title: new Date(entry.at * 1000).toLocaleString() });
  const action = h('td', {}, h('strong', { text: entry.action }), entry.dryRun ? badge('dry run', 'warn') : null);
  const why = [entry.rule ? `rule ${entry.rule}` : '', entry.reason || ''].filter(Boolean).join(': ');
  let undo;
  if (entry.undone) {
    undo = h('td', {}, badge(`undone by ${entry.undone.by}`, 'ok'),
      h('div', { class: 'muted small', text: [entry.undone.command, ...(entry.undone.replies || [])].join(' — ') }));
  } else if (entry.undo && !entry.dryRun && entry.id) {
    const button = h('button', { type: 'button', class: 'small mod-undo', text: busy ? 'Undoing…' : 'Undo', disabled: busy,
      title: `Runs ${entry.undo} as the console`, on: { click: () => undoModeration(entry, button) } });
    undo = h('td', {}, button, h('div', { class: 'muted small', text: entry.undo }));
  } else {
    undo = h('td', { class: 'muted small', text: entry.undo && !entry.dryRun ? entry.undo : '—' });
  }
  const row = h('tr', { dataset: { id: entry.id || '', plugin: entry.plugin, action: entry.action, target: entry.target || '' } },
    when, h('td', { text: entry.plugin }), action, h('td', { text: entry.target || '' }), h('td', { class: 'mono', text: entry.cid || '' }),
    h('td', { text: why }), h('td', { text: entry.by || '' }), undo);
  if (busy) row.dataset.busy = '1';
  return row;
}

async function undoModeration(entry, button) {
  const row = button.closest('tr');
  row.dataset.busy = '1';
  button.disabled = true;
  button.textContent = 'Undoing…';
  try {
    const done = await api(`/api/moderation/actions/${enc(entry.id)}/undo`, { method: 'POST', admin: true });
    toast('info', `Undone: ${done.command}`, done.replies);
  } catch (error) {
    toast('error', `${entry.undo} failed`, [errorText(error)]);
    button.disabled = false;
    button.textContent = 'Undo';
  } finally {
    delete row.dataset.busy;
    moderationView.poller.now();
  }
}

export function wireModeration() {
  moderationView.poller = new Poller(pollModeration, 2000);
  const form = $('#mod-filters');
  form.addEventListener('submit', (event) => { event.preventDefault(); moderationView.poller.now(); });
  let timer = null;
  const changed = () => { clearTimeout(timer); timer = setTimeout(() => moderationView.poller.now(), 250); };
  form.addEventListener('input', changed);
  form.addEventListener('change', changed);
}
