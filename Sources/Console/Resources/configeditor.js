// Hookbot console: a plugin's settings as a form built from its schema (GET /api/plugins/{name}/config),
// saved with PUT: the server checks them as `hookbot check` does, writes them to the overrides file and
// reloads the plugin. Lists and tables are edited as JSON. A form loaded before someone else's change is
// refused (409) and loaded again.
// An ES module: plugins.js puts configButton on each plugin's card; console.js calls wireConfigEditor.

import { api, errorText, Token } from './api.js';
import { $, badge, h, showFormError, toast } from './dom.js';
import { enc } from './format.js';
import { pluginsView } from './plugins.js';

const configEditor = {
  plugin: null,
  view: null,
  /** key → { field, read() → {value} | {error}, error node, reset } */
  inputs: new Map(),
};

/** The Settings button of a plugin's card. */
export function configButton(name) {
  return h('button', { type: 'button', class: 'small ghost plugin-config', text: 'Settings', dataset: { plugin: name },
    on: { click: () => openConfig(name) } });
}

/** Lists and tables (and a setting of any type holding one) are edited as JSON in a text area. */
const isComplex = (field, value) => field.types.some((t) => t === 'array' || t === 'table')
  || (field.types.includes('any') && value !== null && typeof value === 'object');
const shownJSON = (value, pretty) => (value === undefined ? '' : JSON.stringify(value, null, pretty ? 2 : 0));

async function openConfig(name) {
  const dialog = $('#config-dialog');
  configEditor.plugin = name;
  $('#config-title').textContent = `Settings of ${name}`;
  showFormError($('#config-error'), '');
  $('#config-fields').replaceChildren(h('p', { class: 'muted', text: 'Loading…' }));
  if (!dialog.open) dialog.showModal();
  try {
    renderConfig(await api(`/api/plugins/${enc(name)}/config`, { admin: true }));
  } catch (error) {
    $('#config-fields').replaceChildren();
    showFormError($('#config-error'), errorText(error));
  }
}

function renderConfig(view) {
  configEditor.view = view;
  configEditor.inputs.clear();
  $('#config-note').textContent = view.persisted
    ? `Saved to ${view.overridesFile} (read at start on top of hookbot.toml, which is never rewritten), then the plugin is reloaded. Version ${view.version}.`
    : 'No overrides file is configured: changes apply until the bot stops.';
  $('#config-fields').replaceChildren(...view.fields.map(configField));
}

function configField(field) {
  const id = `config-${field.key}`;
  const current = field.value !== undefined ? field.value : field.default;
  const error = h('p', { class: 'field-error', hidden: true, dataset: { key: field.key }, attrs: { role: 'alert' } });
  let input;
  let read;
  if (field.values && field.values.length) {
    input = h('select', { id }, field.values.map((v) => h('option', { value: JSON.stringify(v), text: typeof v === 'string' ? v : JSON.stringify(v), selected: JSON.stringify(v) === JSON.stringify(current) })));
    read = () => ({ value: JSON.parse(input.value) });
  } else if (field.types.length === 1 && field.types[0] === 'boolean') {
    input = h('input', { id, type: 'checkbox', checked: current === true });
    read = () => ({ value: input.checked });
  } else if (isComplex(field, current)) {
    const text = shownJSON(current, true);
    input = h('textarea', { id, class: 'mono', rows: Math.min(16, Math.max(2, text.split('\n').length)), spellcheck: false, value: text });
    read = () => {
      if (!input.value.trim()) return { value: undefined };
      try { return { value: JSON.parse(input.value) }; } catch (e) { return { error: `not JSON: ${e.message}` }; }
    };
  } else {
    const numeric = field.types.includes('number') || field.types.includes('integer');
    input = h('input', { id, type: 'text', spellcheck: false, inputMode: numeric && !field.types.includes('string') ? 'decimal' : 'text',
      value: typeof current === 'string' ? current : shownJSON(current, false) });
    read = () => {
      const raw = input.value;
      if (field.types.includes('boolean') && (raw.trim() === 'false' || raw.trim() === 'true')) return { value: raw.trim() === 'true' };
      if (field.types.includes('string')) return { value: raw };
      // Any type: JSON when it reads as JSON (false, 3, "x"), else the text itself.
      if (field.types.includes('any')) { try { return { value: JSON.parse(raw) }; } catch { return { value: raw }; } }
      if (numeric) {
        const number = Number(raw.trim());
        if (!raw.trim() || !Number.isFinite(number)) return { error: `must be a number${field.types.includes('boolean') ? ' (or false)' : ''}` };
        return { value: number };
      }
      try { return { value: JSON.parse(raw) }; } catch (e) { return { error: `not JSON: ${e.message}` }; }
    };
  }
  const original = JSON.stringify(read().value);
  const entry = { field, read, error, original, reset: false };
  configEditor.inputs.set(field.key, entry);
  const source = { override: ['console override', 'accent'], file: ['hookbot.toml', 'info'], default: ['default', ''] }[field.source] || [field.source, ''];
  let resetButton = null;
  if (field.source === 'override') {
    resetButton = h('button', { type: 'button', class: 'small ghost', text: 'Reset', title: 'Drop the console\'s override (back to hookbot.toml or the default)',
      on: { click: () => { entry.reset = !entry.reset; resetButton.textContent = entry.reset ? 'Keep' : 'Reset'; input.disabled = entry.reset; } } });
  }
  return h('div', { class: 'config-field', dataset: { key: field.key } },
    h('div', { class: 'config-label' }, h('label', { for: id }, h('code', { text: field.key })), badge(source[0], source[1]),
      h('span', { class: 'muted small', text: field.types.join(' | ') }), resetButton),
    field.description ? h('p', { class: 'muted small', text: field.description }) : null,
    input, error);
}

async function saveConfig(event) {
  event.preventDefault();
  const view = configEditor.view;
  if (!view) return;
  const settings = {};
  const reset = [];
  let invalid = false;
  for (const [key, entry] of configEditor.inputs) {
    showFormError(entry.error, '');
    if (entry.reset) { reset.push(key); continue; }
    const read = entry.read();
    if (read.error) { showFormError(entry.error, read.error); invalid = true; continue; }
    if (read.value === undefined) { if (entry.field.source === 'override') reset.push(key); continue; }
    if (JSON.stringify(read.value) !== entry.original) settings[key] = read.value;
  }
  if (invalid) { showFormError($('#config-error'), 'Some settings are not valid; see below.'); return; }
  if (!Object.keys(settings).length && !reset.length) { $('#config-dialog').close(); return; }
  const save = $('#config-save');
  save.disabled = true;
  try {
    const response = await fetch(`/api/plugins/${enc(configEditor.plugin)}/config`, {
      method: 'PUT', cache: 'no-store',
      headers: { 'Content-Type': 'application/json', Accept: 'application/json', Authorization: `Bearer ${Token.get() || ''}` },
      body: JSON.stringify({ version: view.version, settings, reset }),
    });
    const data = await response.json().catch(() => null);
    if (response.ok) {
      const errors = (data.reload && data.reload.errors) || [];
      toast(errors.length ? 'error' : 'info', `${configEditor.plugin}: settings saved${errors.length ? ', but the reload failed' : ' and reloaded'}`,
        errors.map((e) => e.description || e.reason));
      $('#config-dialog').close();
      if (pluginsView.poller) pluginsView.poller.now();
      return;
    }
    const reason = (data && data.reason) || `HTTP ${response.status}`;
    if (response.status === 409) {
      await openConfig(configEditor.plugin);
      showFormError($('#config-error'), `${reason} — the form now shows the current settings (code ${response.status}).`);
      return;
    }
    showFormError($('#config-error'), `${response.status}: ${reason}`);
    for (const problem of (data && data.errors) || []) {
      const entry = problem.key && configEditor.inputs.get(problem.key);
      if (entry) showFormError(entry.error, `${response.status}: ${problem.reason}`);
    }
  } catch (error) {
    showFormError($('#config-error'), errorText(error));
  } finally {
    save.disabled = false;
  }
}

export function wireConfigEditor() {
  $('#config-form').addEventListener('submit', saveConfig);
  for (const id of ['#config-close', '#config-cancel']) $(id).addEventListener('click', () => $('#config-dialog').close());
}
