// Hookbot console, chat: the message box (text, typed, custom-type and cmd messages) and sending.

import { errorText } from './api.js';
import { isMember, renderConversationList } from './conversations.js';
import { $, h, showFormError } from './dom.js';
import { fileNameFromUrl } from './format.js';
import { safeUrl } from './media.js';
import { placeMessage, refreshMessage } from './messages.js';
import { ProtocolError } from './protocol.js';
import { addRecord, chat, newRecord, serverNow, storeFor } from './state.js';

const COMPOSER_HINTS = {
  text: 'Enter sends · Shift+Enter starts a new line · attach, drop or paste files to send them',
  image: 'An image kept elsewhere, by URL (_lctype −2); the text is its caption. The paperclip uploads one.',
  file: 'A file kept elsewhere, by URL (_lctype −6); the text is its caption. The paperclip uploads one.',
  location: 'A location (_lctype −5); the text is its label.',
  custom: 'A custom type registered by a plugin; the text becomes _lctext.',
  cmd: 'A cmd message: the text is the action; online members only, never stored.',
};
const COMPOSER_PLACEHOLDERS = {
  text: 'Write a message…',
  image: 'Caption (optional)',
  file: 'Caption (optional)',
  location: 'Label (optional), e.g. Meet here',
  custom: 'Text (optional)',
  cmd: 'Action, e.g. poke',
};

export function updateComposer() {
  const kind = $('#composer-kind').value;
  for (const extra of document.querySelectorAll('.composer-extra')) extra.hidden = !extra.dataset.kind.split(' ').includes(kind);
  $('#composer-text').placeholder = COMPOSER_PLACEHOLDERS[kind];
  $('#composer-transient').disabled = kind === 'cmd';
  const conv = chat.current && chat.conversations.get(chat.current);
  const canSend = Boolean(conv && isMember(conv) && chat.conn && chat.conn.ready);
  $('#send-button').disabled = !canSend;
  $('#attach-button').disabled = !canSend;
  $('#composer-text').disabled = !conv;
  let hint = COMPOSER_HINTS[kind];
  if (kind === 'text' && $('#composer-transient').checked) hint = 'Transient: online members only, never stored, no receipts.';
  else if (kind === 'text' && conv && conv.room) hint = 'Chat room: whoever is in it now gets the message; no receipts.';
  $('#composer-hint').textContent = hint;
}

export function renderCustomTypes() {
  const select = $('#composer-custom-type');
  const previous = select.value;
  select.replaceChildren();
  if (!chat.types.length) {
    select.append(h('option', { value: '', text: 'No custom types registered' }));
    select.disabled = true;
  } else {
    select.disabled = false;
    for (const type of chat.types) {
      select.append(h('option', { value: String(type.type), text: `${type.name} (${type.type}) · ${type.plugin}` }));
    }
    if (chat.types.some((t) => String(t.type) === previous)) select.value = previous;
  }
  renderCustomFields();
}

/** A form for the selected type's schema: string → text, number/integer → number, boolean → checkbox, table/any → JSON. */
export function renderCustomFields() {
  const box = $('#composer-custom-fields');
  const type = chat.types.find((t) => String(t.type) === $('#composer-custom-type').value);
  box.replaceChildren();
  if (!type) {
    box.append(h('p', { class: 'muted small', text: 'Plugins register types with ctx.types.register; they appear here.' }));
    return;
  }
  const fields = Object.entries(type.fields || {}).sort(([a], [b]) => a.localeCompare(b));
  if (!fields.length) box.append(h('p', { class: 'muted small', text: `${type.name} has no fields.` }));
  for (const [name, spec] of fields) {
    const id = `custom-field-${name.replace(/[^\w-]/g, '_')}`;
    const label = [name, spec.optional ? h('span', { class: 'optional', text: ' (optional)' }) : null, h('span', { class: 'muted', text: ` ${spec.type}` })];
    let input;
    if (spec.type === 'boolean') {
      input = h('input', { type: 'checkbox', id, dataset: { field: name, fieldType: spec.type } });
      box.append(h('label', { class: 'custom-field boolean check', htmlFor: id }, input, ...label));
      continue;
    }
    if (spec.type === 'number' || spec.type === 'integer') {
      input = h('input', { type: 'number', id, step: spec.type === 'integer' ? '1' : 'any', required: !spec.optional });
    } else if (spec.type === 'string') {
      input = h('input', { type: 'text', id, required: !spec.optional });
    } else {
      input = h('textarea', { id, rows: 2, placeholder: spec.type === 'table' ? '{"key": "value"} or [1, 2]' : 'any JSON value', attrs: { spellcheck: 'false' } });
    }
    Object.assign(input.dataset, { field: name, fieldType: spec.type, optional: spec.optional ? 'true' : '' });
    box.append(h('div', { class: 'custom-field' }, h('label', { htmlFor: id }, ...label), input));
  }
}

/** The selected custom type's fields as JSON values; throws with a readable message. */
function customFieldValues() {
  const values = {};
  for (const input of document.querySelectorAll('#composer-custom-fields [data-field]')) {
    const name = input.dataset.field;
    const kind = input.dataset.fieldType;
    const optional = input.dataset.optional === 'true';
    if (kind === 'boolean') { values[name] = input.checked; continue; }
    const raw = input.value;
    if (raw.trim() === '' && kind !== 'string') {
      if (optional) continue;
      throw new Error(`Fill in the field “${name}”.`);
    }
    if (kind === 'string') {
      if (raw === '' && optional) continue;
      values[name] = raw;
    } else if (kind === 'number' || kind === 'integer') {
      const number = Number(raw);
      if (!Number.isFinite(number) || (kind === 'integer' && !Number.isInteger(number))) throw new Error(`“${name}” must be ${kind === 'integer' ? 'a whole number' : 'a number'}.`);
      values[name] = number;
    } else {
      let value;
      try { value = JSON.parse(raw); } catch { throw new Error(`“${name}” must be JSON (${kind === 'table' ? 'an object or an array' : 'any value'}).`); }
      if (kind === 'table' && (value === null || typeof value !== 'object')) throw new Error(`“${name}” must be a JSON object or array.`);
      values[name] = value;
    }
  }
  return values;
}

/** The `direct` fields for what the composer holds: { msg } or { action, ext }. */
function composerContent() {
  const kind = $('#composer-kind').value;
  const text = $('#composer-text').value;
  const withText = (object) => (text.trim() ? { _lctype: object._lctype, _lctext: text, ...object } : object);
  switch (kind) {
    case 'text':
      if (!text.trim()) throw new Error('Write something first.');
      return { msg: JSON.stringify({ _lctype: -1, _lctext: text }) };
    case 'image':
    case 'file': {
      const raw = $('#composer-url').value.trim();
      const url = safeUrl(raw);
      if (!raw || !url || !/^https?:/i.test(raw)) throw new Error('Give the file\'s address as an http(s) URL.');
      const name = $('#composer-filename').value.trim() || fileNameFromUrl(url) || (kind === 'image' ? 'image' : 'file');
      const format = /\.([a-z0-9]{1,8})$/i.exec(name);
      const metaData = { name };
      if (format) metaData.format = format[1].toLowerCase();
      return { msg: JSON.stringify(withText({ _lctype: kind === 'image' ? -2 : -6, _lcfile: { url: raw, metaData } })) };
    }
    case 'location': {
      const lat = $('#composer-lat').valueAsNumber;
      const lng = $('#composer-lng').valueAsNumber;
      if (!(Math.abs(lat) <= 90) || !(Math.abs(lng) <= 180)) throw new Error('Give a latitude (−90…90) and a longitude (−180…180).');
      return { msg: JSON.stringify(withText({ _lctype: -5, _lcloc: { latitude: lat, longitude: lng } })) };
    }
    case 'custom': {
      const type = chat.types.find((t) => String(t.type) === $('#composer-custom-type').value);
      if (!type) throw new Error('No custom type is selected (plugins register them).');
      // A registered type's fields travel in _lcattrs (plugins read msg.attrs), as the Swift SDK sends them.
      return { msg: JSON.stringify(withText({ _lctype: type.type, _lcattrs: customFieldValues() })) };
    }
    case 'cmd': {
      const action = text.trim();
      if (!action) throw new Error('Write the cmd action, e.g. poke.');
      const raw = $('#composer-ext').value.trim();
      let ext = {};
      if (raw) {
        try { ext = JSON.parse(raw); } catch { throw new Error('ext must be a JSON object, e.g. {"times": 2}.'); }
        if (!ext || typeof ext !== 'object' || Array.isArray(ext)) throw new Error('ext must be a JSON object, e.g. {"times": 2}.');
      }
      return { action, ext };
    }
    default:
      throw new Error('Unknown message kind.');
  }
}

function clearComposer() {
  const text = $('#composer-text');
  text.value = '';
  text.style.height = '';
  $('#composer-url').value = '';
  $('#composer-filename').value = '';
  text.focus();
}

export async function sendFromComposer() {
  const cid = chat.current;
  const conv = cid && chat.conversations.get(cid);
  const error = $('#composer-error');
  if (!conv || !chat.conn || !chat.conn.ready) return;
  let content;
  try {
    content = composerContent();
  } catch (problem) {
    showFormError(error, problem.message);
    return;
  }
  showFormError(error, '');
  const transient = $('#composer-transient').checked && content.action == null;
  const rec = newRecord({ cid, from: chat.me, own: true, state: 'pending', ts: null, body: content.msg, action: content.action, ext: content.ext, transient });
  addRecord(storeFor(cid), rec);
  chat.stick = true;
  placeMessage(rec);
  clearComposer();
  await deliver(rec, content);
}

/** Sends a record's content (`{ msg }` or `{ action, ext }`) and shows the server's answer on it. */
export async function deliver(rec, content) {
  const { cid, transient } = rec;
  const conv = chat.conversations.get(cid);
  const store = storeFor(cid);
  const command = { cmd: 'direct', cid, ...content };
  if (transient) command.transient = true;
  if (!transient && content.action == null && !(conv && conv.room)) command.r = true; // ask for receipts
  try {
    if (!chat.conn || !chat.conn.ready) throw new Error('Not connected to the server.');
    const reply = await chat.conn.request(command);
    rec.state = 'sent';
    rec.mid = reply.uid || null;
    rec.ts = typeof reply.t === 'number' ? reply.t : serverNow();
    if (rec.mid) {
      store.byId.set(rec.mid, rec);
      for (const from of chat.pendingReceipts.get(rec.mid) || []) rec.deliveredTo.add(from);
      chat.pendingReceipts.delete(rec.mid);
    }
    if (conv && !transient && content.action == null) conv.lm = rec.ts;
    renderConversationList();
  } catch (problem) {
    rec.ts = serverNow();
    if (problem instanceof ProtocolError) {
      rec.state = 'blocked';
      rec.error = { code: problem.code, reason: problem.reason, detail: problem.detail, appCode: problem.appCode };
    } else {
      rec.state = 'failed';
      rec.error = { reason: errorText(problem) };
    }
  }
  if (chat.current === cid) placeMessage(rec);
  refreshMessage(rec);
}
