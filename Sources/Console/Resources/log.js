// Hookbot console: the Log tab (GET /api/logs, live, filtered by plugin and level).

import { api, Token } from './api.js';
import { $, h, showFormError } from './dom.js';
import { formatTime, plural } from './format.js';

const LOG_MAX = 2000;
const LOG_PAGE = 1000;

export const logView = {
  after: 0,
  paused: false,
  stick: true,
  generation: 0, // bumped when the filters change, so late answers are dropped
  pluginsFetched: 0,
  poller: null,
};

export function setLogPlugins(names) {
  const select = $('#log-plugin');
  const selected = select.value;
  const known = [...select.options].slice(1).map((o) => o.value);
  const wanted = [...new Set([...names, ...(selected ? [selected] : [])])];
  if (known.join('\n') === wanted.join('\n')) return;
  select.replaceChildren(h('option', { value: '', text: 'All' }), ...wanted.map((name) => h('option', { value: name, text: name })));
  select.value = selected;
}

function resetLog() {
  logView.after = 0;
  logView.generation += 1;
  $('#log-entries').replaceChildren();
  $('#log-empty').hidden = false;
  $('#log-jump').hidden = true;
  logView.stick = true;
}

export async function pollLog() {
  if (!Token.get() || logView.paused) return;
  if (Date.now() - logView.pluginsFetched > 10000) { // the plugin filter's choices
    logView.pluginsFetched = Date.now();
    api('/api/plugins', { admin: true }).then((list) => setLogPlugins((list || []).map((p) => p.name))).catch(() => {});
  }
  const generation = logView.generation;
  const notice = $('#log-error');
  try {
    for (let page = 0; page < 3; page += 1) {
      const query = new URLSearchParams({ after: String(logView.after), limit: String(LOG_PAGE) });
      if ($('#log-plugin').value) query.set('plugin', $('#log-plugin').value);
      if ($('#log-level').value !== 'trace') query.set('level', $('#log-level').value);
      const data = await api(`/api/logs?${query}`, { admin: true });
      if (generation !== logView.generation) return;
      const entries = Array.isArray(data && data.entries) ? data.entries : [];
      if (typeof data.next === 'number' && data.next < logView.after) { // the bot restarted: its numbering too
        resetLog();
        return;
      }
      appendLog(entries);
      if (typeof data.next === 'number') logView.after = data.next;
      if (entries.length < LOG_PAGE) break;
    }
    showFormError(notice, '');
  } catch (error) {
    if (error.status !== 401) showFormError(notice, `Could not read the log: ${error.reason}`);
  }
  updateLogSummary();
}

function appendLog(entries) {
  if (!entries.length) return;
  const list = $('#log-entries');
  const fragment = document.createDocumentFragment();
  for (const entry of entries) {
    const meta = Object.entries(entry.metadata || {}).filter(([key]) => key !== 'plugin');
    fragment.append(h('li', { class: 'log-entry', dataset: { level: entry.level || 'info', plugin: entry.plugin || '', seq: String(entry.seq) } },
      h('time', { class: 'log-time', text: formatTime(entry.time * 1000, true), title: new Date(entry.time * 1000).toLocaleString() }),
      h('span', { class: 'log-level', text: entry.level }),
      h('span', { class: `log-plugin${entry.plugin ? '' : ' host'}`, text: entry.plugin || 'host', title: entry.plugin || 'the bot host and server' }),
      h('span', { class: 'log-message' }, entry.message, meta.length ? h('span', { class: 'log-meta', text: meta.map(([k, v]) => `${k}=${v}`).join(' ') }) : null)));
  }
  list.append(fragment);
  while (list.childElementCount > LOG_MAX) list.firstElementChild.remove();
  $('#log-empty').hidden = true;
  if (logView.stick) list.scrollTop = list.scrollHeight;
  else $('#log-jump').hidden = false;
}

function updateLogSummary() {
  const count = $('#log-entries').childElementCount;
  $('#log-summary').textContent = `${plural(count, 'entry', 'entries')} shown${count >= LOG_MAX ? ` (the last ${LOG_MAX})` : ''} · ${logView.paused ? 'paused' : 'live, every second'}`;
}

export function wireLog() {
  const list = $('#log-entries');
  list.addEventListener('scroll', () => {
    logView.stick = list.scrollHeight - list.scrollTop - list.clientHeight < 30;
    if (logView.stick) $('#log-jump').hidden = true;
  });
  $('#log-jump').addEventListener('click', () => {
    list.scrollTop = list.scrollHeight;
    logView.stick = true;
    $('#log-jump').hidden = true;
  });
  for (const id of ['#log-plugin', '#log-level']) {
    $(id).addEventListener('change', () => { resetLog(); logView.poller.now(); });
  }
  $('#log-pause').addEventListener('click', (event) => {
    logView.paused = !logView.paused;
    event.currentTarget.setAttribute('aria-pressed', String(logView.paused));
    event.currentTarget.textContent = logView.paused ? 'Resume' : 'Pause';
    updateLogSummary();
    if (!logView.paused) logView.poller.now();
  });
  $('#log-clear').addEventListener('click', () => {
    list.replaceChildren();
    $('#log-empty').hidden = false;
    $('#log-jump').hidden = true;
    updateLogSummary();
  });
}
