// Hookbot console: the Plugins tab (GET /api/plugins, reload, enable / disable, persistent state).

import { api, errorText, Token } from './api.js';
import { configButton } from './configeditor.js';
import { $, fill, h, showFormError, toast } from './dom.js';
import { enc, formatBytes, formatDuration, formatMillis, formatNumber, plural } from './format.js';
import { setLogPlugins } from './log.js';
import { pollSchedules } from './schedules.js';

export const pluginsView = {
  cards: new Map(), // name → card (see createPluginCard)
  expanded: new Set(), // plugins whose state table is open
  poller: null,
};

export async function pollPlugins() {
  if (!Token.get()) return;
  pollSchedules();
  const notice = $('#plugins-error');
  let list;
  try {
    list = await api('/api/plugins', { admin: true });
  } catch (error) {
    if (error.status !== 401) showFormError(notice, `Could not load the plugins: ${error.reason}`);
    return;
  }
  showFormError(notice, '');
  list = Array.isArray(list) ? list : [];
  renderPlugins(list);
  setLogPlugins(list.map((p) => p.name));
  await Promise.all([...pluginsView.expanded].filter((name) => pluginsView.cards.has(name)).map(loadPluginState));
}

function renderPlugins(list) {
  const container = $('#plugin-list');
  const counts = { loaded: 0, disabled: 0, failed: 0 };
  for (const p of list) counts[p.state] = (counts[p.state] || 0) + 1;
  $('#plugins-summary').textContent = `${plural(list.length, 'plugin')} in dispatch order · ${counts.loaded} loaded · ${counts.disabled} disabled · ${counts.failed} failed · refreshed every 2 s`;
  const seen = new Set();
  list.forEach((plugin, index) => {
    let card = pluginsView.cards.get(plugin.name);
    if (!card) {
      card = createPluginCard(plugin.name);
      pluginsView.cards.set(plugin.name, card);
    }
    updatePluginCard(card, plugin);
    seen.add(plugin.name);
    if (container.children[index] !== card.root) container.insertBefore(card.root, container.children[index] || null);
  });
  for (const [name, card] of pluginsView.cards) {
    if (seen.has(name)) continue;
    card.root.remove();
    pluginsView.cards.delete(name);
    pluginsView.expanded.delete(name);
  }
  $('#plugins-empty').hidden = list.length > 0;
}

function createPluginCard(name) {
  const card = { name, plugin: null, hooksKey: '', stateKey: '' };
  const stat = (label, className = '') => {
    const dd = h('dd', { class: className });
    return [h('div', {}, h('dt', { text: label }), dd), dd];
  };
  const [priorityBox, priority] = stat('Priority');
  const [generationBox, generation] = stat('Generation', 'plugin-generation');
  const [timersBox, timers] = stat('Timers');
  const [memoryBox, memory] = stat('Memory');
  const [failuresBox, failures] = stat('Failures (in a row / total)');
  const [tripsBox, trips] = stat('Breaker trips');
  Object.assign(card, { priority, generation, timers, memory, failures, trips });
  card.state = h('span', { class: 'badge plugin-state' });
  card.path = h('div', { class: 'plugin-path' });
  card.reload = h('button', { type: 'button', class: 'small plugin-reload', text: 'Reload', on: { click: () => reloadPlugin(card) } });
  card.toggle = h('button', { type: 'button', class: 'small plugin-toggle', text: 'Disable', on: { click: () => togglePlugin(card) } });
  card.stateToggle = h('button', { type: 'button', class: 'small ghost plugin-state-toggle', text: 'Show state', attrs: { 'aria-expanded': 'false' }, on: { click: () => toggleStatePanel(card) } });
  card.error = h('div', { class: 'plugin-error', hidden: true });
  card.hooks = h('div', { class: 'table-wrap' });
  card.statePanel = h('div', { class: 'state-panel', hidden: true });
  card.root = h('article', { class: 'card plugin-card', dataset: { plugin: name } },
    h('div', { class: 'plugin-head' },
      h('div', {}, h('div', { class: 'plugin-title' }, h('h2', { text: name }), card.state), card.path),
      h('div', { class: 'plugin-actions' }, card.reload, card.toggle, card.stateToggle, configButton(name))),
    h('dl', { class: 'plugin-stats' }, priorityBox, generationBox, timersBox, memoryBox, failuresBox, tripsBox),
    card.error, card.hooks, card.statePanel);
  return card;
}

function updatePluginCard(card, p) {
  card.plugin = p;
  const state = p.state || 'loaded';
  card.root.classList.toggle('failed', state === 'failed');
  card.root.classList.toggle('disabled', state === 'disabled');
  card.state.textContent = state === 'disabled' && p.disabledBy ? `disabled (${p.disabledBy})` : state;
  card.state.className = `badge plugin-state ${state === 'loaded' ? 'ok' : state === 'failed' ? 'danger' : 'warn'}`;
  card.state.dataset.state = state;
  card.state.title = state === 'disabled' ? (p.disabledBy === 'breaker' ? 'Disabled by the circuit breaker after repeated failures' : 'Disabled by an admin') : '';
  card.path.textContent = p.path || '';
  card.priority.textContent = String(p.priority ?? '—');
  card.generation.textContent = String(p.generation ?? '');
  card.timers.textContent = formatNumber(p.timers);
  card.memory.textContent = formatBytes(p.memoryBytes);
  card.failures.textContent = `${formatNumber(p.consecutiveFailures)} / ${formatNumber(p.totalFailures)}`;
  card.failures.classList.toggle('bad', (p.consecutiveFailures || 0) > 0);
  card.trips.textContent = formatNumber(p.breakerTrips);
  card.trips.classList.toggle('bad', (p.breakerTrips || 0) > 0);
  if (!card.toggle.dataset.busy) {
    card.toggle.textContent = state === 'disabled' ? 'Enable' : 'Disable';
    card.toggle.disabled = state === 'failed';
    card.toggle.title = state === 'failed' ? 'The plugin did not load; fix it and reload' : '';
  }

  const e = p.lastError;
  card.error.hidden = !e;
  if (e) {
    const where = `${e.source || '?'}${e.line != null ? `:${e.line}` : ''}`;
    fill(card.error,
      h('div', {}, h('strong', { text: state === 'failed' ? 'Did not load: ' : 'Last error: ' }), h('span', { class: 'where', text: where }),
        e.hook ? h('span', { text: ` in ${e.hook}` }) : null, ' — ', h('span', { text: e.reason || '' })),
      e.description && e.description !== e.reason ? h('details', {}, h('summary', { text: 'Details' }), h('pre', { text: e.description })) : null);
  }

  const hooks = Array.isArray(p.hooks) ? p.hooks : [];
  const hooksKey = JSON.stringify(hooks);
  if (hooksKey !== card.hooksKey) {
    card.hooksKey = hooksKey;
    card.hooks.replaceChildren(hooks.length ? h('table', { class: 'data hooks-table' },
      h('thead', {}, h('tr', {}, h('th', { text: 'Hook' }), h('th', { class: 'num', text: 'Calls' }), h('th', { class: 'num', text: 'Failures' }),
        h('th', { class: 'num', text: 'Avg ms' }), h('th', { class: 'num', text: 'Max ms' }))),
      h('tbody', {}, hooks.map((hook) => h('tr', {},
        h('td', {}, h('code', { text: hook.name })),
        h('td', { class: 'num', text: formatNumber(hook.calls) }),
        h('td', { class: `num${hook.failures ? ' bad' : ''}`, text: formatNumber(hook.failures) }),
        h('td', { class: 'num', text: hook.calls ? formatMillis(hook.totalMillis / hook.calls) : '—' }),
        h('td', { class: 'num', text: hook.calls ? formatMillis(hook.maxMillis) : '—' }))))) : h('p', { class: 'muted small', text: 'This plugin defines no hooks.' }));
  }
}

function reloadReport(title, report) {
  const lines = [];
  if (report.reloaded && report.reloaded.length) lines.push(`Reloaded: ${report.reloaded.join(', ')}`);
  if (report.loaded && report.loaded.length) lines.push(`Loaded: ${report.loaded.join(', ')}`);
  if (report.unloaded && report.unloaded.length) lines.push(`Unloaded: ${report.unloaded.join(', ')}`);
  const errors = report.errors || [];
  for (const e of errors) lines.push(`${e.source || e.hook || '?'}${e.line != null ? `:${e.line}` : ''} — ${e.reason}`);
  if (!lines.length) lines.push('Nothing changed.');
  toast(errors.length ? 'error' : 'ok', errors.length ? `${title}: ${plural(errors.length, 'error')}` : title, lines);
}

async function runButton(button, task) {
  button.disabled = true;
  button.dataset.busy = 'true';
  try {
    await task();
  } catch (error) {
    toast('error', 'The request failed', [errorText(error)]);
  } finally {
    delete button.dataset.busy;
    button.disabled = false;
    pluginsView.poller.now();
  }
}

function reloadPlugin(card) {
  return runButton(card.reload, async () => {
    reloadReport(`Reloaded ${card.name}`, await api(`/api/plugins/${enc(card.name)}/reload`, { method: 'POST', admin: true }));
  });
}

export function reloadAll() {
  return runButton($('#reload-all'), async () => {
    reloadReport('Reloaded all plugins', await api('/api/plugins/reload', { method: 'POST', admin: true }));
  });
}

function togglePlugin(card) {
  const enable = card.plugin && card.plugin.state === 'disabled';
  return runButton(card.toggle, async () => {
    const plugin = await api(`/api/plugins/${enc(card.name)}/${enable ? 'enable' : 'disable'}`, { method: 'POST', admin: true });
    if (plugin && plugin.name) {
      delete card.toggle.dataset.busy;
      updatePluginCard(card, plugin);
    }
    toast('ok', `${card.name} ${enable ? 'enabled' : 'disabled'}`, enable ? [] : ['Its hooks and timers are not called until you enable it (reloads keep it disabled).']);
  });
}

function toggleStatePanel(card) {
  const open = !pluginsView.expanded.has(card.name);
  if (open) pluginsView.expanded.add(card.name); else pluginsView.expanded.delete(card.name);
  card.statePanel.hidden = !open;
  card.stateToggle.textContent = open ? 'Hide state' : 'Show state';
  card.stateToggle.setAttribute('aria-expanded', String(open));
  if (open) {
    card.stateKey = '';
    card.statePanel.replaceChildren(h('p', { class: 'muted small', text: 'Loading the persistent state…' }));
    loadPluginState(card.name);
  }
}

async function loadPluginState(name) {
  const card = pluginsView.cards.get(name);
  if (!card) return;
  let data;
  try {
    data = await api(`/api/plugins/${enc(name)}/state`, { admin: true });
  } catch (error) {
    if (pluginsView.expanded.has(name)) {
      card.stateKey = '';
      card.statePanel.replaceChildren(h('p', { class: 'notice error', text: `Could not read the state: ${errorText(error)}` }));
    }
    return;
  }
  if (!pluginsView.expanded.has(name)) return;
  const entries = Array.isArray(data && data.entries) ? data.entries : [];
  const key = JSON.stringify(entries);
  if (key === card.stateKey) return;
  card.stateKey = key;
  renderPluginState(card, entries);
}

function renderPluginState(card, entries) {
  const head = h('div', { class: 'section-head' }, h('h3', { text: `Persistent state · ${plural(entries.length, 'key')}` }));
  if (!entries.length) {
    card.statePanel.replaceChildren(head, h('p', { class: 'muted small', text: 'This plugin has stored nothing (ctx.state is empty).' }));
    return;
  }
  const now = Date.now() / 1000;
  const rows = [...entries].sort((a, b) => a.key.localeCompare(b.key)).map((entry) => h('tr', {},
    h('td', {}, h('code', { text: entry.key })),
    h('td', {}, h('pre', { class: 'state-value', text: JSON.stringify(entry.value, null, entry.value && typeof entry.value === 'object' ? 2 : 0) })),
    h('td', {
      text: entry.expiresAt == null ? 'never' : entry.expiresAt > now ? `in ${formatDuration(entry.expiresAt - now)}` : 'expired',
      title: entry.expiresAt == null ? null : new Date(entry.expiresAt * 1000).toLocaleString(),
    }),
    h('td', { class: 'num' }, h('button', { type: 'button', class: 'small danger state-delete', text: 'Delete', title: `Delete ${entry.key}`, on: { click: (event) => deleteStateKey(card, entry.key, event.currentTarget) } }))));
  card.statePanel.replaceChildren(head, h('div', { class: 'table-wrap' }, h('table', { class: 'data state-table' },
    h('thead', {}, h('tr', {}, h('th', { text: 'Key' }), h('th', { text: 'Value' }), h('th', { text: 'Expires' }), h('th', {}, h('span', { class: 'visually-hidden', text: 'Actions' })))),
    h('tbody', {}, rows))));
}

async function deleteStateKey(card, key, button) {
  button.disabled = true;
  try {
    await api(`/api/plugins/${enc(card.name)}/state/${enc(key)}`, { method: 'DELETE', admin: true });
    toast('ok', `Deleted ${key}`, [`from ${card.name}'s state`]);
  } catch (error) {
    button.disabled = false;
    toast('error', `Could not delete ${key}`, [errorText(error)]);
  }
  await loadPluginState(card.name);
}
