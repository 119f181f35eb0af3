// Hookbot console, chat: the open conversation's messages: placing, describing (typed messages, files,
// locations, custom types, cards), receipts, refusals and recall.

import { errorText } from './api.js';
import { CARD_ACTION, CARD_TYPE, cardClickText, cardView } from './cards.js';
import { displayName, isMember, joinConversation, loadHistory, openConversation } from './conversations.js';
import { $, avatar, badge, fill, h, icon, toast } from './dom.js';
import { fileNameFromUrl, formatBytes, formatClock, formatTime } from './format.js';
import { freshFileUrl, mediaUrl, onServer, THUMBNAIL_SIZE, thumbnailUrl } from './media.js';
import { chat, storeFor } from './state.js';
import { uploadNode } from './uploads.js';

export function setMessagesEmpty(text, action = null) {
  const box = $('#messages-empty');
  box.hidden = false;
  box.replaceChildren(h('div', {}, h('p', { text }), action));
}

/** Renders the open conversation's messages from its store. */
export function renderMessages({ keepOffset = false } = {}) {
  const box = $('#messages');
  const conv = chat.current && chat.conversations.get(chat.current);
  if (!conv) {
    box.replaceChildren();
    setMessagesEmpty(chat.conversations.size ? 'Open a conversation on the left to start chatting.' : 'No conversations yet — create one or open the lobby.');
    return;
  }
  const store = storeFor(conv.id);
  const fromBottom = box.scrollHeight - box.scrollTop;
  store.list.sort((a, b) => order(a) - order(b));
  const nodes = store.list.map(messageNode);
  if (store.hasOlder) {
    nodes.unshift(h('button', { type: 'button', class: 'small history-more', text: 'Load older messages', on: { click: (event) => loadOlder(event.currentTarget) } }));
  }
  box.replaceChildren(...nodes);
  if (!conv.room && !isMember(conv)) {
    setMessagesEmpty(`You are not a member of “${displayName(conv)}”.`,
      h('button', { type: 'button', class: 'primary', text: 'Join this conversation', on: { click: () => joinAndOpen(conv.id) } }));
  } else if (!store.list.length) {
    setMessagesEmpty(store.loaded ? 'No messages yet. Say hello — try “ping”.' : 'Loading messages…');
  } else {
    $('#messages-empty').hidden = true;
  }
  if (keepOffset) box.scrollTop = box.scrollHeight - fromBottom;
  else if (chat.stick) box.scrollTop = box.scrollHeight;
}

async function loadOlder(button) {
  button.disabled = true;
  button.textContent = 'Loading…';
  try {
    await loadHistory(chat.current, true);
  } catch (error) {
    button.disabled = false;
    button.textContent = 'Load older messages';
    toast('error', 'Could not load older messages', [errorText(error)]);
  }
}

async function joinAndOpen(cid) {
  try {
    await joinConversation(cid);
    await openConversation(cid);
  } catch (error) {
    toast('error', 'Could not join', [errorText(error)]);
  }
}

// Messages still waiting for their ack sort last.
const order = (rec) => (Number.isFinite(rec.ts) ? rec.ts : Infinity);

/** Inserts a message of the open conversation at its place by time. */
export function placeMessage(rec) {
  const box = $('#messages');
  const node = messageNode(rec);
  const key = order(rec);
  let before = null;
  for (let sibling = box.lastElementChild; sibling && sibling.classList.contains('message'); sibling = sibling.previousElementSibling) {
    if (sibling === node) continue;
    if (parseFloat(sibling.dataset.order) <= key) break;
    before = sibling;
  }
  if (node.nextElementSibling !== before || node.parentNode !== box) box.insertBefore(node, before);
  $('#messages-empty').hidden = true;
  if (chat.stick || rec.own) box.scrollTop = box.scrollHeight;
}

export function refreshMessage(rec) { if (rec.node) fillMessage(rec); }

function messageNode(rec) {
  if (!rec.node) rec.node = document.createElement('div');
  fillMessage(rec);
  return rec.node;
}

/** Typed JSON (`_lctype` an integer), or null for other bodies. */
export function parseTyped(body) {
  if (typeof body !== 'string' || body[0] !== '{') return null;
  try {
    const value = JSON.parse(body);
    return value && typeof value === 'object' && Number.isInteger(value._lctype) ? value : null;
  } catch { return null; }
}

const BUILTIN_TYPES = { '-1': 'text', '-2': 'image', '-3': 'audio', '-4': 'video', '-5': 'location', '-6': 'file', '-127': 'recalled' };

function typeName(number) {
  const type = chat.types.find((t) => t.type === number);
  return type ? type.name : null;
}

function valueText(value) { return typeof value === 'string' ? value : JSON.stringify(value); }

/** What a message shows: its text, badges and an attachment. */
function describe(rec) {
  const badges = [];
  if (rec.transient) badges.push(badge('transient'));
  if (rec.priority && rec.priority !== 'normal') badges.push(badge(`${rec.priority} priority`, rec.priority === 'high' ? 'warn' : ''));
  if (rec.mentioned && !rec.own) badges.push(badge('mentions you', 'accent'));
  if (rec.edited) badges.push(badge('edited'));
  if (rec.recalled) return { text: 'This message was recalled', badges: [] };
  if (rec.upload) return { text: rec.caption || '', badges, attachment: uploadNode(rec) };
  if (rec.body == null && rec.error && rec.error.stage === 'upload') {
    return { text: rec.caption || '', badges, attachment: h('div', { class: 'attachment' }, h('span', { class: 'file-chip' }, icon('file'), h('span', { text: rec.fileName || 'file' }))) };
  }
  if (rec.action === CARD_ACTION) return { text: cardClickText(rec), badges: [badge('card click', 'info'), ...badges] };
  if (rec.action != null) {
    const ext = rec.ext && Object.keys(rec.ext).length ? ` ${JSON.stringify(rec.ext)}` : '';
    return { text: `/${rec.action}${ext}`, badges: [badge('cmd', 'info'), ...badges] };
  }
  const typed = parseTyped(rec.body);
  if (!typed) return { text: rec.body == null ? '' : String(rec.body), badges };
  const type = typed._lctype;
  const caption = typeof typed._lctext === 'string' ? typed._lctext : '';
  const file = typed._lcfile && typeof typed._lcfile === 'object' ? typed._lcfile : null;
  if (type === -1) return { text: caption, badges };
  if (type === -127) return { text: 'This message was recalled', badges: [] };
  if (type === -2 || type === -3 || type === -4 || type === -6) {
    const label = BUILTIN_TYPES[type];
    return { text: caption, badges: [badge(label, 'info'), ...badges], attachment: fileAttachment(rec, type, file, caption) };
  }
  if (type === -5) {
    const loc = typed._lcloc && typeof typed._lcloc === 'object' ? typed._lcloc : {};
    const lat = Number(loc.latitude);
    const lng = Number(loc.longitude);
    const known = Number.isFinite(lat) && Number.isFinite(lng);
    const place = known ? `${lat.toFixed(5)}, ${lng.toFixed(5)}` : 'unknown place';
    const link = known ? h('a', { href: `https://www.openstreetmap.org/?mlat=${lat}&mlon=${lng}#map=15/${lat}/${lng}`, target: '_blank', rel: 'noopener noreferrer', text: place }) : place;
    return { text: caption || 'Location', badges: [badge('location', 'info'), ...badges], attachment: h('div', { class: 'attachment' }, h('span', { class: 'file-chip' }, icon('location'), link)) };
  }
  const card = type === CARD_TYPE ? cardView(rec, typed) : null;
  if (card) return { text: '', badges: [badge('card', 'accent'), ...badges], attachment: card };
  const attrs = type > 0 && typed._lcattrs && typeof typed._lcattrs === 'object' && !Array.isArray(typed._lcattrs) ? typed._lcattrs : {};
  // hookbot.* attributes are the host's bookkeeping (the hop count of a bot's message), not the type's fields.
  const fields = [...Object.entries(attrs).filter(([key]) => !key.startsWith('hookbot.')), ...Object.entries(typed).filter(([key]) => !key.startsWith('_lc'))];
  const name = type > 0 ? typeName(type) : null;
  const attachment = fields.length ? h('dl', { class: 'kv' }, fields.flatMap(([key, value]) => [h('dt', { text: key }), h('dd', { text: valueText(value) })])) : null;
  return { text: caption, badges: [badge(name ? `${name} · type ${type}` : `type ${type}`, 'accent'), ...badges], attachment };
}

/** An image, audio, video or file message's attachment: the thumbnail (opening the original), a player,
 *  and a chip with the name (a download link), format, dimensions, duration and size. Files on the IM
 *  server only are shown inline; others are links. The preview is kept while the body stays the same, so
 *  re-rendering the message (a receipt) does not stop a player. */
function fileAttachment(rec, type, file, caption) {
  const given = file && mediaUrl(file.url);
  const local = given && onServer(given);
  const current = rec.preview && rec.preview.body === rec.body ? rec.preview : null;
  const url = (current && current.fresh) || local || given;
  const meta = (file && file.metaData && typeof file.metaData === 'object') ? file.metaData : {};
  const number = (value) => (typeof value === 'number' && Number.isFinite(value) && value > 0 ? value : null);
  const [width, height, duration, size] = [number(meta.width), number(meta.height), number(meta.duration), number(meta.size)];
  const name = (typeof meta.name === 'string' && meta.name) || (url && fileNameFromUrl(url.href)) || BUILTIN_TYPES[type];
  const details = [
    typeof meta.format === 'string' ? meta.format : null,
    width && height ? `${width}×${height}` : null,
    duration ? formatClock(duration) : null,
    size ? formatBytes(size) : null,
  ].filter(Boolean).join(' · ');
  const link = url
    ? h('a', { class: 'file-link', href: url.href, target: '_blank', rel: 'noopener noreferrer', download: type === -6 ? name : null, text: name })
    : h('span', { text: `${name} (no valid http(s) URL)` });
  const chip = h('span', { class: 'file-chip' }, icon(BUILTIN_TYPES[type]), link, details ? h('span', { class: 'muted file-details', text: details }) : null);
  if (!current) {
    const objId = file && typeof file.objId === 'string' && file.objId ? file.objId : null;
    rec.preview = { body: rec.body, fresh: null };
    rec.preview.node = local ? filePreview(type, local, { name, caption, width, height, objId, preview: rec.preview }) : null;
  }
  return h('div', { class: 'attachment' }, rec.preview.node, chip);
}

/** The thumbnail or player of a file on the IM server. When it fails to load and the message names the
 *  stored file (`objId`), its URL may have expired (`signed_urls`): it is asked for once more with
 *  `GET /1.1/files/<objId>` (as this client) and the fresh URL used, for the download link too. */
function filePreview(type, url, { name, caption, width, height, objId, preview }) {
  let renewed = !objId;
  const renew = async (apply) => {
    if (renewed) return false;
    renewed = true;
    const fresh = await freshFileUrl(objId);
    if (!fresh || fresh.href === url.href) return false;
    url = fresh;
    preview.fresh = fresh;
    apply(fresh);
    for (const link of preview.node.closest('.attachment')?.querySelectorAll('a.file-link') || []) link.href = fresh.href;
    return true;
  };
  if (type === -2) {
    const thumb = thumbnailUrl(url);
    const img = h('img', { class: 'thumbnail', src: thumb || url.href, alt: caption || name, decoding: 'async', referrerPolicy: 'no-referrer' });
    if (width && height) {
      // The box the thumbnail will fill, so the list does not jump when it arrives.
      const scale = Math.min(1, THUMBNAIL_SIZE / width, THUMBNAIL_SIZE / height);
      img.width = Math.max(1, Math.round(width * scale));
      img.height = Math.max(1, Math.round(height * scale));
    }
    const link = h('a', { class: 'thumbnail-link', href: url.href, target: '_blank', rel: 'noopener noreferrer', title: 'Open the original' }, img);
    img.addEventListener('load', keepAtBottom);
    img.addEventListener('error', async () => {
      if (await renew((fresh) => { link.href = fresh.href; img.src = thumbnailUrl(fresh) || fresh.href; })) return;
      // No thumbnail (a format the server does not thumbnail): the original, else nothing.
      if (img.src !== url.href) img.src = url.href; else link.remove();
    });
    return link;
  }
  if (type !== -3 && type !== -4) return null;
  const player = type === -3
    ? h('audio', { class: 'player', controls: true, preload: 'metadata', src: url.href })
    : h('video', { class: 'player', controls: true, preload: 'metadata', playsInline: true, src: url.href, on: { loadedmetadata: keepAtBottom } });
  player.addEventListener('error', () => { renew((fresh) => { player.src = fresh.href; }); });
  return player;
}

/** A picture or video that got its size keeps the list at its end if it was there. */
function keepAtBottom() {
  const box = $('#messages');
  if (chat.stick) box.scrollTop = box.scrollHeight;
}

function fillMessage(rec) {
  const node = rec.node;
  node.dataset.order = String(order(rec));
  node.dataset.from = rec.from || '';
  if (rec.mid) node.dataset.mid = rec.mid; else delete node.dataset.mid;
  if (rec.system) {
    node.className = 'message system';
    node.replaceChildren(h('div', { class: 'message-text', text: rec.text }));
    return;
  }
  const view = describe(rec);
  const classes = ['message'];
  if (rec.own) classes.push('own');
  if (chat.info && rec.from === chat.info.bot) classes.push('bot');
  if (rec.transient) classes.push('transient');
  if (rec.action != null) classes.push('cmd');
  if (rec.recalled) classes.push('recalled');
  if (rec.state === 'pending') classes.push('pending');
  if (rec.state === 'uploading') classes.push('uploading');
  if (rec.state === 'blocked') classes.push('blocked');
  if (rec.state === 'failed') classes.push('failed');
  node.className = classes.join(' ');
  const time = Number.isFinite(rec.ts) && rec.state !== 'failed' && rec.state !== 'blocked'
    ? h('time', { text: formatTime(rec.ts), title: new Date(rec.ts).toLocaleString(), attrs: { datetime: new Date(rec.ts).toISOString() } }) : null;
  fill(node,
    h('div', { class: 'message-meta' }, avatar(rec.from, true), h('span', { class: 'message-from', text: rec.from }), time, view.badges),
    h('div', { class: 'message-bubble' }, h('div', { class: 'message-text', text: view.text }), view.attachment),
    rec.error ? errorNode(rec.error) : null,
    rec.own ? statusNode(rec) : null);
}

/** The refusal exactly as the server sent it: code · reason (its detail when given), symbolic name, appCode. */
function errorNode(error) {
  const upload = error.stage === 'upload';
  if (error.code == null) {
    return h('div', { class: 'message-error' }, upload ? 'Not uploaded:' : 'Not sent:', h('span', { class: 'error-reason', text: error.reason }));
  }
  return h('div', { class: 'message-error', attrs: { role: 'note' } },
    upload ? 'Not uploaded —' : 'Not delivered —',
    h('span', { class: 'error-code', text: String(error.code) }), '·',
    h('span', { class: 'error-reason', text: error.detail || error.reason || '' }),
    error.detail && error.reason ? h('span', { class: 'error-name', text: error.reason }) : null,
    error.appCode != null ? h('span', { class: 'error-appcode-label' }, 'appCode ', h('span', { class: 'error-appcode', text: String(error.appCode) })) : null);
}

function shortList(names) {
  const list = [...names];
  return list.length <= 2 ? list.join(', ') : `${list.slice(0, 2).join(', ')} +${list.length - 2}`;
}

function statusNode(rec) {
  let state = rec.state;
  let text = '';
  let title = null;
  if (rec.state === 'pending') text = 'Sending…';
  else if (rec.state === 'uploading') text = 'Uploading…';
  else if (rec.state === 'sent' && !rec.recalled) {
    if (rec.transient || rec.action != null) text = '✓ Sent (not stored)';
    else if (rec.readBy.size || rec.readAny) {
      state = 'read';
      text = rec.readBy.size ? `✓✓ Read by ${shortList(rec.readBy)}` : '✓✓ Read';
      title = rec.readBy.size ? `Read by ${[...rec.readBy].join(', ')}` : null;
    } else if (rec.deliveredTo.size || rec.deliveredAny) {
      state = 'delivered';
      text = rec.deliveredTo.size ? `✓✓ Delivered to ${shortList(rec.deliveredTo)}` : '✓✓ Delivered';
      title = rec.deliveredTo.size ? `Delivered to ${[...rec.deliveredTo].join(', ')}` : null;
    } else text = '✓ Sent';
  }
  const canRecall = rec.state === 'sent' && rec.mid && !rec.recalled && !rec.transient && rec.action == null;
  if (!text && !canRecall) return null;
  return h('div', { class: 'message-status' },
    text ? h('span', { class: 'receipt', text, title, dataset: { state } }) : null,
    canRecall ? h('button', { type: 'button', class: 'message-recall', text: 'Recall', on: { click: (event) => recall(rec, event.currentTarget) } }) : null);
}

async function recall(rec, button) {
  button.disabled = true;
  try {
    await chat.conn.request({ cmd: 'patch', op: 'modify', patches: [{ cid: rec.cid, mid: rec.mid, timestamp: rec.ts, recall: true }] });
    rec.recalled = true;
    refreshMessage(rec);
  } catch (error) {
    button.disabled = false;
    toast('error', 'The message could not be recalled', [errorText(error)]);
  }
}
