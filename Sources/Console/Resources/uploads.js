// Hookbot console, chat: files uploaded to the IM server (POST /media) and sent as typed messages.

import { errorText } from './api.js';
import { deliver } from './composer.js';
import { isMember } from './conversations.js';
import { $, h, icon, showFormError } from './dom.js';
import { enc, formatBytes } from './format.js';
import { mediaUrl, serverBase, serverOrigin } from './media.js';
import { placeMessage, refreshMessage } from './messages.js';
import { addRecord, chat, newRecord, serverNow, storeFor } from './state.js';

/** A refused or failed upload: the server's `{code, reason, error}` when it answered one. */
class UploadError extends Error {
  constructor(status, body) {
    const known = body && typeof body === 'object' && Number.isInteger(body.code);
    super(known ? `${body.code} ${body.error || body.reason || ''}`.trim() : `HTTP ${status}`);
    this.code = known ? body.code : null;
    this.reason = known ? body.reason : null;
    this.detail = known ? body.error : null;
    this.status = status;
  }
}

/** The typed message for a file the server sniffed as `mime`: −2 image, −3 audio, −4 video, −6 file. */
function fileMessageType(mime) {
  const kind = String(mime || '').split('/')[0];
  return kind === 'image' ? -2 : kind === 'audio' ? -3 : kind === 'video' ? -4 : -6;
}

/** Uploads files to the open conversation, each as a message of its own; the composer's text (if any)
 *  becomes the first one's caption. */
function attachFiles(files) {
  const list = [...(files || [])];
  if (!list.length) return;
  const cid = chat.current;
  const conv = cid && chat.conversations.get(cid);
  const error = $('#composer-error');
  if (!conv || !isMember(conv) || !chat.conn || !chat.conn.ready) {
    showFormError(error, 'Open a conversation you are a member of to send files.');
    return;
  }
  showFormError(error, '');
  const text = $('#composer-text');
  const caption = text.value.trim() ? text.value : '';
  if (caption) { text.value = ''; text.style.height = ''; }
  list.forEach((file, index) => { uploadAndSend(file, cid, index === 0 ? caption : ''); });
}

/** One file: a message in the list with a progress bar while `POST /media` uploads it (as the logged-in
 *  client, with the session token of its `session opened`), then the LeanCloud typed message with
 *  `_lcfile {objId, url, metaData}` from the server's answer. A refusal (4601 too large, 4602 quota, …)
 *  stays in the list with its code and reason. */
async function uploadAndSend(file, cid, caption) {
  const rec = newRecord({
    cid, from: chat.me, own: true, state: 'uploading', ts: null, body: null, caption, transient: false,
    upload: { name: file.name || 'file', size: file.size, loaded: 0, xhr: null },
  });
  const store = storeFor(cid);
  addRecord(store, rec);
  chat.stick = true;
  if (chat.current === cid) placeMessage(rec);
  let answer;
  try {
    answer = await postMedia(file, rec);
  } catch (problem) {
    if (problem && problem.name === 'AbortError') {
      const index = store.list.indexOf(rec);
      if (index >= 0) store.list.splice(index, 1);
      if (rec.node) rec.node.remove();
      return;
    }
    rec.fileName = `${rec.upload.name} (${formatBytes(rec.upload.size)})`;
    rec.upload = null;
    rec.state = problem instanceof UploadError && problem.code != null ? 'blocked' : 'failed';
    rec.error = problem instanceof UploadError
      ? { stage: 'upload', code: problem.code, reason: problem.reason, detail: problem.detail || problem.message }
      : { stage: 'upload', reason: errorText(problem) };
    rec.ts = serverNow();
    if (chat.current === cid) placeMessage(rec);
    refreshMessage(rec);
    return;
  }
  const metaData = { name: answer.name, format: answer.format, size: answer.size, width: answer.width, height: answer.height, duration: answer.duration };
  for (const key of Object.keys(metaData)) if (metaData[key] == null) delete metaData[key];
  const url = mediaUrl(answer.url);
  const message = { _lctype: fileMessageType(answer.mime), _lcfile: { objId: answer.id, url: url ? url.href : answer.url, metaData } };
  if (caption) message._lctext = caption;
  rec.body = JSON.stringify(message);
  rec.upload = null;
  rec.state = 'pending';
  refreshMessage(rec);
  await deliver(rec, { msg: rec.body });
}

/** `POST <server>/media?name=…` with the file as the body, reporting upload progress on the record. */
function postMedia(file, rec) {
  return new Promise((resolve, reject) => {
    if (!chat.st) { reject(new Error('This session has no session token to upload with; log in again.')); return; }
    const xhr = new XMLHttpRequest();
    rec.upload.xhr = xhr;
    chat.uploads.add(xhr);
    xhr.addEventListener('loadend', () => chat.uploads.delete(xhr));
    xhr.open('POST', new URL(`media?name=${enc(rec.upload.name)}`, serverBase()).href);
    xhr.setRequestHeader('X-LC-IM-Session-Token', chat.st);
    if (file.type) xhr.setRequestHeader('Content-Type', file.type);
    xhr.upload.addEventListener('progress', (event) => { if (event.lengthComputable) showUploadProgress(rec, event.loaded, event.total); });
    xhr.upload.addEventListener('load', () => showUploadProgress(rec, file.size, file.size));
    xhr.addEventListener('load', () => {
      let body = null;
      try { body = JSON.parse(xhr.responseText); } catch { /* not JSON */ }
      if (xhr.status >= 200 && xhr.status < 300 && body && typeof body.id === 'string') resolve(body);
      else reject(new UploadError(xhr.status, body));
    });
    xhr.addEventListener('error', () => reject(new Error(`The upload to ${serverOrigin()} failed: the server could not be reached or closed the connection.`)));
    xhr.addEventListener('abort', () => reject(new DOMException('The upload was cancelled.', 'AbortError')));
    xhr.send(file);
  });
}

function showUploadProgress(rec, loaded, total) {
  if (!rec.upload) return;
  rec.upload.loaded = loaded;
  const percent = total > 0 ? (loaded >= total ? 100 : Math.floor((loaded * 100) / total)) : 100;
  if (rec.progressNode) {
    rec.progressNode.value = percent;
    rec.progressNode.textContent = `${percent}%`;
  }
  if (rec.progressText) rec.progressText.textContent = `${percent}% · ${formatBytes(loaded)} of ${formatBytes(total)}`;
}

/** The attachment of a message still uploading: name, progress bar, and a button that cancels it. */
export function uploadNode(rec) {
  const { name, size, loaded } = rec.upload;
  const percent = size > 0 ? Math.floor((loaded * 100) / size) : 0;
  rec.progressNode = h('progress', { class: 'upload-progress', max: 100, value: percent, text: `${percent}%`, attrs: { 'aria-label': `Uploading ${name}` } });
  rec.progressText = h('span', { class: 'upload-text muted', text: `${percent}% · ${formatBytes(loaded)} of ${formatBytes(size)}` });
  return h('div', { class: 'attachment upload' },
    h('span', { class: 'file-chip' }, icon('file'), h('span', { class: 'upload-name', text: name })),
    rec.progressNode,
    h('div', { class: 'upload-row' }, rec.progressText,
      h('button', { type: 'button', class: 'upload-cancel link-button', text: 'Cancel', on: { click: () => rec.upload && rec.upload.xhr && rec.upload.xhr.abort() } })));
}

/** The file picker, drag-and-drop onto the conversation, and files pasted into the message box. */
export function wireUploads() {
  const input = $('#composer-file');
  $('#attach-button').addEventListener('click', () => input.click());
  input.addEventListener('change', () => {
    attachFiles(input.files);
    input.value = '';
  });
  // A picture pasted into the message box (a screenshot, say) is sent like a picked file.
  $('#composer-text').addEventListener('paste', (event) => {
    const files = event.clipboardData ? [...event.clipboardData.files] : [];
    if (!files.length || $('#attach-button').disabled) return;
    event.preventDefault();
    attachFiles(files);
  });
  const area = $('#chat-main');
  const overlay = $('#drop-overlay');
  const carriesFiles = (event) => Boolean(event.dataTransfer) && [...event.dataTransfer.types].includes('Files');
  let depth = 0;
  area.addEventListener('dragenter', (event) => {
    if (!carriesFiles(event)) return;
    event.preventDefault();
    depth += 1;
    overlay.hidden = $('#attach-button').disabled;
  });
  area.addEventListener('dragover', (event) => {
    if (!carriesFiles(event)) return;
    event.preventDefault();
    event.dataTransfer.dropEffect = $('#attach-button').disabled ? 'none' : 'copy';
  });
  area.addEventListener('dragleave', () => {
    depth = Math.max(0, depth - 1);
    if (!depth) overlay.hidden = true;
  });
  area.addEventListener('drop', (event) => {
    if (!event.dataTransfer || !event.dataTransfer.files.length) return;
    event.preventDefault();
    depth = 0;
    overlay.hidden = true;
    attachFiles(event.dataTransfer.files);
  });
  // A file dropped beside the drop area must not replace the console with the file.
  for (const type of ['dragover', 'drop']) {
    window.addEventListener(type, (event) => { if (carriesFiles(event)) event.preventDefault(); });
  }
}
