// Hookbot console: a sandbox chat client speaking the JSON protocol of docs/PROTOCOL.md over /ws, and
// views of the bot's internals through the admin HTTP API of docs/CONSOLE.md.
//
// Sections: utilities · configuration and admin token · admin API · WebSocket client · chat ·
// plugins · log · interception · tabs and start-up.
// All user and plugin text goes into the page with textContent (through h()), never as HTML.
'use strict';

// ============================================================== Utilities

const $ = (selector, root = document) => root.querySelector(selector);

/** Creates an element. Props: class, text, dataset, attrs, on (listeners), or any DOM property.
 *  Children are nodes or strings (inserted as text). */
function h(tag, props = {}, ...children) {
  const node = document.createElement(tag);
  for (const [key, value] of Object.entries(props)) {
    if (value == null || value === false) continue;
    if (key === 'class') node.className = value;
    else if (key === 'text') node.textContent = value;
    else if (key === 'dataset') Object.assign(node.dataset, value);
    else if (key === 'attrs') for (const [name, v] of Object.entries(value)) { if (v != null) node.setAttribute(name, v); }
    else if (key === 'on') for (const [name, listener] of Object.entries(value)) node.addEventListener(name, listener);
    else node[key] = value;
  }
  for (const child of children.flat()) {
    if (child == null || child === false) continue;
    node.append(child instanceof Node ? child : String(child));
  }
  return node;
}

/** sessionStorage (per tab), tolerant of storage being unavailable. */
const tabStore = {
  get(key) { try { return sessionStorage.getItem(key); } catch { return null; } },
  set(key, value) {
    try { if (value == null || value === '') sessionStorage.removeItem(key); else sessionStorage.setItem(key, value); } catch { /* storage off */ }
  },
  getJSON(key, fallback) { try { return JSON.parse(this.get(key)) ?? fallback; } catch { return fallback; } },
  setJSON(key, value) { this.set(key, JSON.stringify(value)); },
};

const plural = (n, word, many = `${word}s`) => `${n.toLocaleString()} ${n === 1 ? word : many}`;
const formatNumber = (n) => (typeof n === 'number' ? n.toLocaleString() : '—');

function formatTime(ms, withSeconds = false) {
  const date = new Date(ms);
  const time = date.toLocaleTimeString([], { hour: '2-digit', minute: '2-digit', second: withSeconds ? '2-digit' : undefined });
  if (date.toDateString() === new Date().toDateString()) return time;
  return `${date.toLocaleDateString([], { month: 'short', day: 'numeric' })} ${time}`;
}

function formatBytes(bytes) {
  if (typeof bytes !== 'number') return '—';
  if (bytes < 1024) return `${bytes} B`;
  if (bytes < 1024 * 1024) return `${(bytes / 1024).toFixed(1)} KB`;
  return `${(bytes / 1024 / 1024).toFixed(1)} MB`;
}

function formatMillis(ms) {
  if (!ms) return '0';
  if (ms < 0.01) return '<0.01';
  return ms < 10 ? ms.toFixed(2) : ms < 100 ? ms.toFixed(1) : Math.round(ms).toLocaleString();
}

function formatDuration(seconds) {
  const s = Math.max(0, Math.round(seconds));
  if (s < 90) return `${s} s`;
  if (s < 90 * 60) return `${Math.round(s / 60)} min`;
  if (s < 48 * 3600) return `${Math.round(s / 3600)} h`;
  return `${Math.round(s / 86400)} days`;
}

/** A media length as m:ss (h:mm:ss past an hour). */
function formatClock(seconds) {
  const s = Math.max(0, Math.round(seconds));
  const two = (n) => String(n).padStart(2, '0');
  return s >= 3600 ? `${Math.floor(s / 3600)}:${two(Math.floor(s / 60) % 60)}:${two(s % 60)}` : `${Math.floor(s / 60)}:${two(s % 60)}`;
}

/** A stable colour for a name (FNV-1a hash, spread by the golden ratio). */
function hueOf(name) {
  let x = 0x811c9dc5;
  for (const ch of String(name)) x = Math.imul(x ^ ch.codePointAt(0), 0x01000193) >>> 0;
  return Math.round(((x * 0.618033988749895) % 1) * 360);
}

function avatar(name, small = false) {
  const node = h('span', { class: small ? 'avatar small' : 'avatar', text: ([...String(name || '?').trim()][0] || '?').toUpperCase(), attrs: { 'aria-hidden': 'true' } });
  node.style.setProperty('--hue', hueOf(name));
  return node;
}

/** replaceChildren without the null / false children (which it would print). */
const fill = (node, ...children) => node.replaceChildren(...children.flat().filter((child) => child != null && child !== false));

/** Small line icons (inline SVG, so no emoji font is needed). */
const ICON_PATHS = {
  image: 'M3 5h18v14H3z M3 16l5-5 4 4 3-3 6 6 M15.5 9.5a1.5 1.5 0 1 0 0-.01',
  file: 'M6 2h9l5 5v15H6z M14 2v6h6',
  audio: 'M9 18V5l12-2v13 M9 18a3 3 0 1 1-6 0a3 3 0 1 1 6 0 M21 16a3 3 0 1 1-6 0a3 3 0 1 1 6 0',
  video: 'M2 6h14v12H2z M16 10l6-4v12l-6-4',
  location: 'M12 22s7-6.5 7-12a7 7 0 1 0-14 0c0 5.5 7 12 7 12z M12 12.5a2.5 2.5 0 1 0 0-5a2.5 2.5 0 1 0 0 5',
};
function icon(name) {
  const ns = 'http://www.w3.org/2000/svg';
  const svg = document.createElementNS(ns, 'svg');
  svg.setAttribute('viewBox', '0 0 24 24');
  svg.setAttribute('class', 'icon');
  svg.setAttribute('aria-hidden', 'true');
  const path = document.createElementNS(ns, 'path');
  path.setAttribute('d', ICON_PATHS[name]);
  svg.append(path);
  return svg;
}

const badge = (text, kind = '') => h('span', { class: `badge ${kind}`.trim(), text });

/** Only http(s) URLs become links or images (no javascript: and the like). */
function safeUrl(value) {
  if (typeof value !== 'string' || !value) return null;
  try {
    const url = new URL(value, location.href);
    return url.protocol === 'http:' || url.protocol === 'https:' ? url.href : null;
  } catch { return null; }
}

/** The IM server's HTTP address: this page's origin with an embedded server, else where the remote bot's
 *  server is (its WebSocket's folder, ws → http, wss → https). Uploads go there, and the files shown inline
 *  come from there only (the page's CSP allows no other). */
function serverBase() {
  const url = new URL('.', wsURL());
  url.protocol = url.protocol === 'wss:' ? 'https:' : 'http:';
  url.search = '';
  return url;
}
const serverOrigin = () => serverBase().origin;

/** A message's file URL as a URL object (a bare path resolved against the IM server), or null if it is
 *  not http(s). */
function mediaUrl(value) {
  if (typeof value !== 'string' || !value) return null;
  try {
    const url = new URL(value, serverBase());
    url.hash = '';
    return url.protocol === 'http:' || url.protocol === 'https:' ? url : null;
  } catch { return null; }
}

/** Where this page loads a file from: the IM server's own files (`…/media/<id>/…`, also when the message
 *  names them by another address of the server: its public_url, localhost for 127.0.0.1) from the server
 *  this page talks to; null for files elsewhere, which are only linked. */
function onServer(url) {
  if (url.origin === serverOrigin()) return url;
  const at = url.pathname.search(/\/media\/[\w-]{1,64}(\/|$)/);
  return at < 0 ? null : new URL(url.pathname.slice(at + 1), serverBase());
}

/** LeanCloud's thumbnail form (AV.File#thumbnailURL): the file's URL + `?imageView/2/w/W/h/H`. */
const THUMBNAIL_SIZE = 320;
const thumbnailUrl = (url) => (url.search ? null : `${url.href}?imageView/2/w/${THUMBNAIL_SIZE}/h/${THUMBNAIL_SIZE}`);

function fileNameFromUrl(value) {
  try { return decodeURIComponent(new URL(value).pathname.split('/').pop() || ''); } catch { return ''; }
}

function showFormError(node, message) {
  node.textContent = message || '';
  node.hidden = !message;
}

/** A human sentence for any error this page meets. */
function errorText(error) {
  if (error instanceof ProtocolError) return error.message;
  if (error instanceof ApiError) return error.reason;
  return (error && error.message) || String(error);
}

function toast(kind, title, lines = [], timeout = kind === 'error' ? 10000 : 5000) {
  const box = $('#toasts');
  const close = h('button', { type: 'button', text: '×', attrs: { 'aria-label': 'Dismiss' } });
  const node = h('div', { class: `toast ${kind}`, attrs: { role: kind === 'error' ? 'alert' : 'status' } },
    h('div', { class: 'toast-body' }, h('strong', { text: title }), lines.length ? h('ul', {}, lines.map((line) => h('li', { text: line }))) : null),
    close);
  close.addEventListener('click', () => node.remove());
  box.append(node);
  while (box.childElementCount > 5) box.firstElementChild.remove();
  setTimeout(() => node.remove(), timeout);
}

/** Runs a task now and then every `interval` ms, one run at a time, while started. */
class Poller {
  constructor(task, interval) {
    this.task = task;
    this.interval = interval;
    this.running = false;
    this.busy = false;
    this.again = false;
    this.timer = null;
  }

  start() {
    if (this.running) return;
    this.running = true;
    this.run();
  }

  stop() {
    this.running = false;
    clearTimeout(this.timer);
  }

  /** Runs again as soon as possible (after the current run, if one is under way). */
  now() {
    if (!this.running) return;
    clearTimeout(this.timer);
    this.run();
  }

  async run() {
    if (this.busy) { this.again = true; return; }
    this.busy = true;
    try { await this.task(); } catch (error) { console.error(error); }
    this.busy = false;
    if (!this.running) return;
    if (this.again) { this.again = false; this.run(); return; }
    clearTimeout(this.timer);
    this.timer = setTimeout(() => this.run(), this.interval);
  }
}

// ============================================================== Configuration and admin token

// The page talks to its own origin only: the admin API (and the token it carries) never goes anywhere
// else, whatever the address bar says. The chat's WebSocket is the one GET /api/info names (the bot's
// configured server for a remote bot), never one taken from the page's URL.

const Token = {
  key: 'hookbot.adminToken',
  get() { return tabStore.get(this.key) || ''; },
  set(value) {
    tabStore.set(this.key, value || null);
    updateTokenButton();
  },
  /** Moves `#token=…` from the address bar into this tab's storage. */
  takeFromURL() {
    const fragment = new URLSearchParams(location.hash.replace(/^#/, ''));
    const token = fragment.get('token');
    if (token == null) return;
    if (token.trim()) this.set(token.trim());
    fragment.delete('token');
    const rest = fragment.toString();
    history.replaceState(history.state, '', location.pathname + location.search + (rest ? `#${rest}` : ''));
  },
};

/** Why the admin panels are locked, shown above the token form. */
let tokenMessage = '';

function updateTokenButton() {
  const button = $('#token-button');
  if (!button) return;
  const set = Boolean(Token.get());
  fill(button, set ? 'Forget ' : 'Set ', h('span', { class: 'wide-only', text: 'admin ' }), 'token');
  button.title = set ? 'The admin token is kept for this tab; click to forget it' : 'The Plugins, Log and Interception tabs need the admin token';
}

/** Shows the token form instead of the admin panels' content while no token is set. */
function updateGates() {
  const locked = !Token.get();
  for (const name of ADMIN_TABS) {
    const panel = $(`#panel-${name}`);
    panel.querySelector('.token-gate').hidden = !locked;
    panel.querySelector('.admin-content').hidden = locked;
  }
  const form = $('#token-form');
  if (ADMIN_TABS.includes(activeTab)) $(`#panel-${activeTab} .token-gate`).append(form);
  $('#token-message').textContent = tokenMessage
    || 'This part of the console shows and changes the bot\'s internals, so it needs the admin token.';
  renderPushes();
}

// ============================================================== Admin API

class ApiError extends Error {
  constructor(status, reason) {
    super(reason);
    this.status = status;
    this.reason = reason;
  }
}

/** Calls the admin API; JSON in and out. Errors become ApiError with the server's `reason`.
 *  A 401 (or no token) locks the admin panels until a token is entered. */
async function api(path, { method = 'GET', body, admin = false } = {}) {
  const headers = { Accept: 'application/json' };
  if (body !== undefined) headers['Content-Type'] = 'application/json';
  if (admin) {
    const token = Token.get();
    if (!token) {
      updateGates();
      throw new ApiError(401, 'No admin token is set in this tab.');
    }
    headers.Authorization = `Bearer ${token}`;
  }
  if (!/^\/(?!\/)/.test(path)) throw new ApiError(0, `Not a path of this console: ${path}`);
  let response;
  try {
    response = await fetch(path, { method, headers, cache: 'no-store', body: body === undefined ? undefined : JSON.stringify(body) });
  } catch (error) {
    throw new ApiError(0, `The server could not be reached (${error.message}).`);
  }
  const text = await response.text();
  let data = null;
  try { data = text ? JSON.parse(text) : null; } catch { data = null; }
  if (!response.ok) {
    const reason = (data && typeof data.reason === 'string' && data.reason) || text.trim() || `HTTP ${response.status}`;
    if (response.status === 401 && admin) {
      tokenMessage = `The server refused the token: ${reason}`;
      Token.set('');
      updateGates();
    }
    throw new ApiError(response.status, reason);
  }
  return data;
}

const enc = encodeURIComponent;

// ============================================================== WebSocket client

/** An error reply (`error`, a refused `ack`, or `session closed` answering a request). */
class ProtocolError extends Error {
  constructor(reply) {
    super(`${reply.code} ${reply.reason || ''}${reply.detail ? `: ${reply.detail}` : ''}`.trim());
    this.code = reply.code;
    this.reason = reply.reason;
    this.detail = reply.detail;
    this.appCode = reply.appCode;
  }
}

const isErrorReply = (c) => c.cmd === 'error' || (c.code != null && (c.cmd === 'ack' || (c.cmd === 'session' && c.op === 'closed')));

/** One WebSocket speaking the JSON protocol: a request carries `i` and gets exactly one reply;
 *  everything else the server sends is an event. */
class ImConnection {
  constructor(url, onEvent, onClose) {
    this.url = url;
    this.onEvent = onEvent;
    this.onClose = onClose;
    this.serial = 0;
    this.pending = new Map();
    this.ready = false; // a session is open on it
    this.socket = null;
  }

  open() {
    return new Promise((resolve, reject) => {
      try {
        this.socket = new WebSocket(this.url);
      } catch (error) {
        reject(new Error(`${this.url} is not a WebSocket address (${error.message})`));
        return;
      }
      this.socket.onopen = () => resolve();
      this.socket.onmessage = (event) => this.receive(event.data);
      this.socket.onclose = (event) => {
        reject(new Error(`Could not connect to ${this.url}. Is the server running?`));
        for (const waiter of this.pending.values()) {
          clearTimeout(waiter.timer);
          waiter.reject(new Error('The connection was closed.'));
        }
        this.pending.clear();
        this.onClose(this, event);
      };
    });
  }

  get isOpen() { return Boolean(this.socket) && this.socket.readyState === WebSocket.OPEN; }

  receive(data) {
    let command;
    try { command = JSON.parse(data); } catch { return; }
    if (!command || typeof command !== 'object') return;
    const waiter = command.i != null ? this.pending.get(command.i) : undefined;
    if (!waiter) { this.onEvent(command); return; }
    this.pending.delete(command.i);
    clearTimeout(waiter.timer);
    if (isErrorReply(command)) waiter.reject(new ProtocolError(command));
    else waiter.resolve(command);
  }

  request(command, timeout = 15000) {
    if (!this.isOpen) return Promise.reject(new Error('Not connected to the server.'));
    const i = ++this.serial;
    return new Promise((resolve, reject) => {
      const timer = setTimeout(() => {
        this.pending.delete(i);
        reject(new Error('The server did not answer in time.'));
      }, timeout);
      this.pending.set(i, { resolve, reject, timer });
      this.socket.send(JSON.stringify({ ...command, i }));
    });
  }

  send(command) { if (this.isOpen) this.socket.send(JSON.stringify(command)); }

  close() { if (this.socket) this.socket.close(); }
}

// ============================================================== Chat

const HISTORY_PAGE = 50;

const chat = {
  me: null, // client id, once logged in
  info: null, // GET /api/info
  types: [], // GET /api/types
  conn: null,
  st: null, // session token of the last login (reconnects with signatures on)
  skew: 0, // server clock minus ours, ms
  conversations: new Map(), // cid → conversation (see conversationFrom)
  unread: new Map(), // cid → count
  stores: new Map(), // cid → { list, byId, hasOlder, loaded, readUpTo }
  current: null, // open conversation id
  room: null, // chat room this connection is in
  online: new Set(), // members of the open conversation known to be online
  roomCount: null,
  pendingReceipts: new Map(), // message id → [client ids], receipts that came before our ack
  acks: new Map(), // cid → [message ids] waiting to be acknowledged
  ackTimer: null,
  readTimer: null,
  listTimer: null,
  membersTimer: null,
  reconnectDelay: 1,
  reconnectTimer: null,
  keepAlive: null,
  stick: true, // the message list follows new messages
  localSerial: 0,
  uploads: new Set(), // XMLHttpRequests of uploads in flight (aborted at logout)
};

const serverNow = () => Date.now() + chat.skew;
const lastConversationKey = () => `hookbot.cid.${chat.me}`;
const tempKey = () => `hookbot.temp.${chat.me}`;

function setStatus(state, text) {
  const pill = $('#connection-status');
  pill.dataset.state = state;
  pill.textContent = text;
}

// ---------- Connection and login

async function loadInfo() {
  const info = await api('/api/info');
  chat.info = info || {};
  const bot = $('#bot-name');
  bot.textContent = chat.info.bot ? `· bot ${chat.info.bot}` : '';
  bot.hidden = !chat.info.bot;
  const parts = [];
  if (chat.info.bot) parts.push(`The bot ${chat.info.bot} is listening.`);
  if (chat.info.lobby) parts.push(`You will join the conversation “${chat.info.lobbyName || 'lobby'}” to try it.`);
  if (chat.info.signatures) parts.push('This server requires signatures: the console signs with the admin token.');
  $('#login-info').textContent = parts.join(' ');
  return chat.info;
}

async function loadTypes() {
  try {
    const types = await api('/api/types');
    chat.types = Array.isArray(types) ? types : [];
  } catch (error) {
    chat.types = [];
    showFormError($('#composer-error'), `Custom types could not be loaded: ${errorText(error)}`);
  }
  renderCustomTypes();
}

/** The chat's WebSocket: `ws` from GET /api/info (this origin's /ws, or the absolute URL of a remote
 *  bot's server), resolved against this page. */
function wsURL() {
  const url = new URL((chat.info && chat.info.ws) || '/ws', location.href);
  if (url.protocol === 'https:' || url.protocol === 'http:') url.protocol = url.protocol === 'https:' ? 'wss:' : 'ws:';
  url.hash = '';
  return url.href;
}

/** Adds `t`, `n`, `s` from POST /api/sign when the server requires signatures. */
async function signed(command, action, { cid, members } = {}) {
  if (!chat.info || !chat.info.signatures) return command;
  if (!Token.get()) throw new Error('This server requires signatures, which the console makes with the admin token: set the token first (Plugins tab).');
  const body = { clientId: chat.me, action };
  if (cid) body.conversationId = cid;
  if (members) body.members = members;
  const signature = await api('/api/sign', { method: 'POST', body, admin: true });
  return { ...command, t: signature.timestamp, n: signature.nonce, s: signature.signature };
}

/** Opens a WebSocket and a session for chat.me. */
async function connect() {
  const conn = new ImConnection(wsURL(), onEvent, onConnectionClosed);
  chat.conn = conn;
  await conn.open();
  const open = { cmd: 'session', op: 'open', peerId: chat.me };
  let reply;
  try {
    if (chat.st && chat.info && chat.info.signatures) {
      try {
        reply = await conn.request({ ...open, st: chat.st });
      } catch (error) {
        if (error.code !== 4112) throw error;
        chat.st = null;
      }
    }
    if (!reply) reply = await conn.request(await signed(open, 'open'));
  } catch (error) {
    conn.close();
    throw error;
  }
  chat.st = reply.st || null;
  if (typeof reply.t === 'number') chat.skew = reply.t - Date.now();
  chat.room = null;
  conn.ready = true;
  setStatus('online', 'Chat connected');
  updateComposer();
  clearInterval(chat.keepAlive);
  chat.keepAlive = setInterval(() => { conn.request({ cmd: 'echo' }).catch(() => {}); }, 30000);
}

function onConnectionClosed(conn) {
  if (conn !== chat.conn || !conn.ready) return; // a failed attempt; its caller reports it
  conn.ready = false;
  clearInterval(chat.keepAlive);
  updateComposer();
  if (chat.me) scheduleReconnect();
}

function scheduleReconnect() {
  if (chat.reconnectTimer) return;
  const delay = chat.reconnectDelay;
  chat.reconnectDelay = Math.min(delay * 2, 30);
  setStatus('connecting', `Reconnecting in ${delay} s…`);
  chat.reconnectTimer = setTimeout(async () => {
    chat.reconnectTimer = null;
    if (!chat.me) return;
    setStatus('connecting', 'Reconnecting…');
    try {
      await connect();
      chat.reconnectDelay = 1;
      await refreshConversations();
      if (chat.current) await openConversation(chat.current);
    } catch (error) {
      if (error instanceof ProtocolError && error.code < 4200) {
        forcedLogout(`The server refused the login: ${error.message}`);
      } else if (chat.me && !(chat.conn && chat.conn.ready)) {
        scheduleReconnect();
      }
    }
  }, delay * 1000);
}

async function login(clientId) {
  chat.me = clientId;
  setStatus('connecting', 'Connecting…');
  if (!chat.info) await loadInfo();
  await connect();
  tabStore.set('hookbot.clientId', clientId);
  showChat();
  loadTypes();
  try {
    await refreshConversations();
    await openInitialConversation();
  } catch (error) {
    toast('error', 'Could not load your conversations', [errorText(error)]);
  }
}

/** Forgets everything of the logged-in user (the connection must be closed or closing). */
function resetChat() {
  chat.me = null;
  clearTimeout(chat.reconnectTimer);
  chat.reconnectTimer = null;
  chat.reconnectDelay = 1;
  clearInterval(chat.keepAlive);
  Object.assign(chat, { st: null, current: null, room: null, roomCount: null });
  for (const map of [chat.conversations, chat.unread, chat.stores, chat.pendingReceipts, chat.acks]) map.clear();
  for (const upload of chat.uploads) upload.abort();
  chat.uploads.clear();
  chat.online.clear();
  $('#conversation-list').replaceChildren();
  $('#messages').replaceChildren();
  $('#login-screen').hidden = false;
  $('#chat-layout').hidden = true;
  $('#current-user').textContent = '';
  document.title = 'Hookbot console';
}

async function logout() {
  const conn = chat.conn;
  chat.conn = null;
  resetChat();
  tabStore.set('hookbot.clientId', null);
  if (conn && conn.isOpen) {
    try { await conn.request({ cmd: 'session', op: 'close' }, 3000); } catch { /* closing anyway */ }
    conn.close();
  }
  setStatus('offline', 'Chat offline');
  $('#login-client-id').focus();
}

/** The server ended the session (e.g. 4111) or refuses to log in again. */
function forcedLogout(message) {
  const conn = chat.conn;
  chat.conn = null;
  const id = chat.me;
  resetChat();
  if (conn) conn.close();
  setStatus('error', 'Logged out');
  $('#login-client-id').value = id || '';
  showFormError($('#login-error'), message);
}

function showChat() {
  $('#login-screen').hidden = true;
  $('#chat-layout').hidden = false;
  $('#current-user').textContent = chat.me;
  document.title = `${chat.me} · Hookbot console`;
  $('#me-avatar').replaceWith(Object.assign(avatar(chat.me), { id: 'me-avatar' }));
  $('#open-lobby').hidden = !(chat.info && chat.info.lobby);
  renderHeader();
  renderMembers();
  renderMessages();
  updateComposer();
}

// ---------- Events from the server

function onEvent(c) {
  switch (c.cmd) {
    case 'direct': receiveDirect(c); break;
    case 'rcp': receiveReceipt(c); break;
    case 'unread':
      for (const u of c.convs || []) if (u.cid !== chat.current) chat.unread.set(u.cid, u.unread);
      renderConversationList();
      break;
    case 'patch': if (c.op === 'modify') receivePatch(c); break;
    case 'conv': conversationEvent(c); break;
    case 'goaway': if (chat.conn) chat.conn.close(); break;
    case 'session':
      if (c.op === 'closed') forcedLogout(`The server closed the session: ${c.code || ''} ${c.reason || ''}${c.detail ? `: ${c.detail}` : ''}`.trim());
      break;
    case 'error': toast('error', 'The server reported an error', [new ProtocolError(c).message]); break;
    default: break;
  }
}

function storeFor(cid) {
  let store = chat.stores.get(cid);
  if (!store) {
    store = { list: [], byId: new Map(), hasOlder: false, loaded: false, readUpTo: 0 };
    chat.stores.set(cid, store);
  }
  return store;
}

function newRecord(fields) {
  return { key: `m${++chat.localSerial}`, deliveredTo: new Set(), readBy: new Set(), ...fields };
}

function addRecord(store, rec) {
  store.list.push(rec);
  if (rec.mid) store.byId.set(rec.mid, rec);
}

const mentionsMe = (pids, all) => Boolean(all) || (Array.isArray(pids) && pids.includes(chat.me));

function receiveDirect(c) {
  if (!c.cid || !c.id) return;
  const store = storeFor(c.cid);
  if (store.byId.has(c.id)) return; // delivery is at-least-once
  const rec = newRecord({
    mid: c.id, cid: c.cid, from: c.fromPeerId || '', ts: c.timestamp || serverNow(), body: c.msg,
    action: c.action, ext: c.ext, transient: c.transient === true, offline: c.offline === true,
    priority: c.priority, mentioned: mentionsMe(c.mentionPids, c.mentionAll),
    own: c.fromPeerId === chat.me, state: c.fromPeerId === chat.me ? 'sent' : 'received',
  });
  const stored = !rec.transient && rec.action == null;
  if (stored) queueAck(c.cid, c.id);
  addRecord(store, rec);
  const conv = chat.conversations.get(c.cid);
  if (conv && stored) conv.lm = Math.max(conv.lm || 0, rec.ts);
  if (c.cid === chat.current) {
    placeMessage(rec);
    markReadSoon();
  } else if (stored && !rec.offline && !rec.own) {
    chat.unread.set(c.cid, (chat.unread.get(c.cid) || 0) + 1);
  }
  if (conv) renderConversationList(); else scheduleListRefresh();
}

/** Acknowledges stored messages, one `ack` per conversation for messages that arrive together. */
function queueAck(cid, mid) {
  const ids = chat.acks.get(cid) || [];
  ids.push(mid);
  chat.acks.set(cid, ids);
  if (chat.ackTimer) return;
  chat.ackTimer = setTimeout(() => {
    chat.ackTimer = null;
    for (const [id, mids] of chat.acks) if (chat.conn) chat.conn.send({ cmd: 'ack', cid: id, ids: mids });
    chat.acks.clear();
  }, 0);
}

function markReadSoon() {
  clearTimeout(chat.readTimer);
  chat.readTimer = setTimeout(markRead, 300);
}

/** Marks the open conversation read up to its newest message from others (read receipts). */
async function markRead() {
  const cid = chat.current;
  const conv = cid && chat.conversations.get(cid);
  if (!conv || conv.room || !isMember(conv) || document.hidden || !chat.conn || !chat.conn.ready) return;
  const store = storeFor(cid);
  let last = null;
  for (const rec of store.list) {
    if (rec.mid && !rec.own && !rec.system && !rec.transient && rec.action == null && (!last || rec.ts > last.ts)) last = rec;
  }
  if (!last || store.readUpTo >= last.ts) return;
  store.readUpTo = last.ts;
  try {
    await chat.conn.request({ cmd: 'read', cid, mid: last.mid, t: last.ts });
  } catch {
    store.readUpTo = 0;
  }
}

function receiveReceipt(c) {
  if (!c.cid || !c.from) return;
  const store = storeFor(c.cid);
  if (c.read) {
    for (const rec of store.list) {
      if (rec.own && rec.state === 'sent' && rec.ts <= (c.t || Infinity) && !rec.transient && rec.action == null && !rec.readBy.has(c.from)) {
        rec.readBy.add(c.from);
        refreshMessage(rec);
      }
    }
    return;
  }
  if (!c.id) return;
  const rec = store.byId.get(c.id);
  if (!rec) { // the receipt overtook our ack
    chat.pendingReceipts.set(c.id, [...(chat.pendingReceipts.get(c.id) || []), c.from]);
    return;
  }
  rec.deliveredTo.add(c.from);
  refreshMessage(rec);
}

const isRecalledBody = (body) => { const t = parseTyped(body); return Boolean(t) && t._lctype === -127; };

function receivePatch(c) {
  for (const patch of c.patches || []) {
    const rec = storeFor(patch.cid).byId.get(patch.mid);
    if (!rec) continue;
    if (patch.recall || isRecalledBody(patch.data)) rec.recalled = true;
    else if (typeof patch.data === 'string') { rec.body = patch.data; rec.edited = true; }
    refreshMessage(rec);
  }
}

/** "Jerry", "you and Jerry", "Tom, Jerry and Spike"; capitalised at the start of a sentence. */
function namesText(ids, capital = true) {
  const names = ids.map((id) => (id === chat.me ? 'you' : id));
  const text = names.length <= 2 ? names.join(' and ') : `${names.slice(0, -1).join(', ')} and ${names[names.length - 1]}`;
  return capital ? text.charAt(0).toUpperCase() + text.slice(1) : text;
}

function conversationEvent(c) {
  const cid = c.cid;
  if (!cid) return;
  const conv = chat.conversations.get(cid);
  const by = c.initBy;
  const byName = by === chat.me ? 'You' : by || 'Someone';
  const ids = Array.isArray(c.m) ? c.m : [];
  switch (c.op) {
    case 'members-joined': {
      if (conv && conv.members) conv.members = [...new Set([...conv.members, ...ids])];
      const others = ids.filter((id) => id !== by);
      if (!by || !others.length) systemLine(cid, `${namesText(ids)} joined`);
      else if (ids.includes(by)) systemLine(cid, `${byName} started the conversation with ${namesText(others, false)}`); // conv start
      else systemLine(cid, `${byName} added ${namesText(ids, false)}`);
      break;
    }
    case 'members-left':
      if (conv && conv.members) conv.members = conv.members.filter((id) => !ids.includes(id));
      systemLine(cid, !by || (ids.length === 1 && ids[0] === by) ? `${namesText(ids)} left` : `${byName} removed ${namesText(ids, false)}`);
      break;
    case 'invited': // members-joined, which follows, says it in the conversation
      if (cid.startsWith('_tmp:')) rememberTemp(cid);
      toast('info', `${by || 'Someone'} added you to a conversation`, [cid]);
      break;
    case 'kicked':
      if (conv && conv.members) conv.members = conv.members.filter((id) => id !== chat.me);
      systemLine(cid, `${byName} removed you`);
      break;
    case 'updated': {
      const patch = (c.attr && typeof c.attr === 'object') ? c.attr : {};
      if (conv && typeof patch.name === 'string') conv.name = patch.name;
      systemLine(cid, typeof patch.name === 'string' ? `${byName} renamed the conversation to “${patch.name}”` : `${byName} updated the conversation`);
      break;
    }
    case 'joined': case 'left': break; // our own join or quit: members-joined / the quit reply say it
    default: return;
  }
  scheduleListRefresh();
  if (cid === chat.current) {
    renderHeader();
    renderMembers();
    refreshMembersSoon();
    updateComposer();
  }
}

/** A grey line in a conversation ("Jerry joined"), placed after what is there now. Events carry no
 *  time, so it is dated a second before our estimate of the server's clock: what the event caused (a
 *  bot's welcome) comes after it even when history is loaded later. */
function systemLine(cid, text) {
  const store = storeFor(cid);
  let latest = 0;
  for (const rec of store.list) if (Number.isFinite(rec.ts) && rec.ts > latest) latest = rec.ts;
  const rec = newRecord({ system: true, cid, from: '', text, ts: Math.max(serverNow() - 1000, latest + 0.001) });
  addRecord(store, rec);
  if (cid === chat.current) placeMessage(rec);
}

// ---------- Conversations

function conversationFrom(result) {
  const id = result.objectId;
  return {
    id,
    name: result.name || '',
    members: Array.isArray(result.m) ? result.m : null, // absent for public conversations we are not in
    creator: result.c,
    room: result.tr === true,
    unique: result.unique === true,
    attr: result.attr && typeof result.attr === 'object' ? result.attr : {},
    lm: result.lm || result.updatedAt || result.createdAt || 0,
    temp: id.startsWith('_tmp:'),
    ttl: result.ttl,
    fetchedAt: Date.now(),
  };
}

const isMember = (conv) => (conv.room ? chat.room === conv.id : Boolean(conv.members && conv.members.includes(chat.me)));

function displayName(conv) {
  if (conv.name) return conv.name;
  const others = (conv.members || []).filter((id) => id !== chat.me);
  return others.length ? others.join(', ') : conv.id;
}

function tempIds() { return tabStore.getJSON(tempKey(), []); }
function rememberTemp(cid) { tabStore.setJSON(tempKey(), [...new Set([...tempIds(), cid])].slice(-100)); }

async function queryConversations(command) {
  const reply = await chat.conn.request({ cmd: 'conv', op: 'query', ...command });
  return Array.isArray(reply.results) ? reply.results : [];
}

/** Conversations the user is in, chat rooms and public conversations; temporary ones by id. */
async function refreshConversations() {
  let results;
  try {
    results = await queryConversations({ limit: 200 });
  } catch (error) {
    if (error.code !== 4310) throw error; // too many to scan: only the user's own
    results = await queryConversations({ where: { m: chat.me }, limit: 200 });
  }
  const temp = tempIds();
  if (temp.length) {
    const found = (await queryConversations({ tempConvIds: temp })).filter((r) => r.objectId.startsWith('_tmp:'));
    tabStore.setJSON(tempKey(), found.map((r) => r.objectId));
    results.push(...found);
  }
  const next = new Map();
  for (const result of results) next.set(result.objectId, conversationFrom(result));
  const current = chat.current && chat.conversations.get(chat.current);
  if (current && !next.has(current.id)) next.set(current.id, current); // still open here
  chat.conversations = next;
  renderConversationList();
}

function scheduleListRefresh() {
  clearTimeout(chat.listTimer);
  chat.listTimer = setTimeout(() => {
    if (chat.conn && chat.conn.ready) refreshConversations().catch(() => {});
  }, 300);
}

async function fetchConversation(cid) {
  const command = cid.startsWith('_tmp:') ? { tempConvIds: [cid] } : { where: { objectId: cid }, limit: 1 };
  const result = (await queryConversations(command)).find((r) => r.objectId === cid);
  return result ? conversationFrom(result) : null;
}

/** Joins (a normal conversation, or enters a chat room) with `conv add` of ourselves. */
async function joinConversation(cid) {
  await chat.conn.request(await signed({ cmd: 'conv', op: 'add', cid, m: [chat.me] }, 'join', { cid }));
  if (cid.startsWith('_tmp:')) rememberTemp(cid);
  const conv = await fetchConversation(cid);
  if (conv) {
    if (conv.room) chat.room = cid;
    chat.conversations.set(cid, conv);
  }
  renderConversationList();
  return conv;
}

async function ensureMember(cid) {
  const conv = chat.conversations.get(cid) || await fetchConversation(cid);
  if (!conv) throw new Error(`There is no conversation ${cid} you can see.`);
  chat.conversations.set(cid, conv);
  if (!conv.room && !isMember(conv)) await joinConversation(cid);
}

async function openInitialConversation() {
  const lobby = chat.info && chat.info.lobby;
  if (lobby) {
    try { await ensureMember(lobby); } catch (error) { toast('error', 'Could not join the lobby', [errorText(error)]); }
  }
  const last = tabStore.get(lastConversationKey());
  const target = last && chat.conversations.has(last) ? last : lobby && chat.conversations.has(lobby) ? lobby : null;
  if (target) await openConversation(target);
}

async function openConversation(cid) {
  let conv = chat.conversations.get(cid);
  if (!conv) {
    conv = await fetchConversation(cid);
    if (!conv) throw new Error(`There is no conversation ${cid} you can see.`);
    chat.conversations.set(cid, conv);
  }
  if (chat.current !== cid) {
    chat.current = cid;
    chat.online.clear();
    chat.roomCount = null;
    chat.stick = true;
  }
  tabStore.set(lastConversationKey(), cid);
  chat.unread.delete(cid);
  renderConversationList();
  renderHeader();
  renderMembers();
  renderPushes();
  renderMessages();
  updateComposer();
  try {
    if (conv.room && chat.room !== cid) await joinConversation(cid);
    if (chat.current !== cid) return;
    const current = chat.conversations.get(cid);
    if (current.room || isMember(current)) {
      await loadHistory(cid);
      await loadReadMarks(cid);
      markReadSoon();
    }
  } catch (error) {
    if (chat.current === cid) setMessagesEmpty(`The conversation could not be loaded: ${errorText(error)}`);
  }
  if (chat.current === cid) {
    renderHeader();
    updateComposer();
    refreshMembers();
  }
}

/** Loads the newest page of history (or, with `older`, the page before what is shown). */
async function loadHistory(cid, older = false) {
  const store = storeFor(cid);
  const command = { cmd: 'logs', cid, limit: HISTORY_PAGE };
  if (older) {
    let oldest = Infinity;
    for (const rec of store.list) if (rec.mid && rec.ts < oldest) oldest = rec.ts;
    if (Number.isFinite(oldest)) command.t = oldest;
  }
  const reply = await chat.conn.request(command);
  const items = Array.isArray(reply.logs) ? reply.logs : [];
  for (const item of items) {
    const existing = store.byId.get(item.msgId);
    if (existing) {
      if ((item.recalled || isRecalledBody(item.data)) && !existing.recalled) { existing.recalled = true; refreshMessage(existing); }
      continue;
    }
    addRecord(store, newRecord({
      mid: item.msgId, cid, from: item.from, ts: item.timestamp, body: item.data,
      recalled: item.recalled === true || isRecalledBody(item.data), priority: item.priority,
      mentioned: mentionsMe(item.mentionPids, item.mentionAll),
      own: item.from === chat.me, state: item.from === chat.me ? 'sent' : 'received',
    }));
  }
  if (older || !store.loaded) store.hasOlder = items.length >= HISTORY_PAGE;
  store.loaded = true;
  if (cid === chat.current) renderMessages({ keepOffset: older });
}

/** Marks our own stored messages delivered / read from the other members' cursors. */
async function loadReadMarks(cid) {
  const conv = chat.conversations.get(cid);
  if (!conv || conv.room || !isMember(conv)) return;
  let reply;
  try { reply = await chat.conn.request({ cmd: 'conv', op: 'max-read', cid }); } catch { return; }
  for (const rec of storeFor(cid).list) {
    if (!rec.own || rec.state !== 'sent' || rec.transient || rec.action != null) continue;
    const delivered = rec.ts <= (reply.maxAckTimestamp || 0);
    const read = rec.ts <= (reply.maxReadTimestamp || 0);
    if (delivered !== Boolean(rec.deliveredAny) || read !== Boolean(rec.readAny)) {
      rec.deliveredAny = delivered || rec.deliveredAny;
      rec.readAny = read || rec.readAny;
      refreshMessage(rec);
    }
  }
}

// ---------- Members

function refreshMembersSoon() {
  clearTimeout(chat.membersTimer);
  chat.membersTimer = setTimeout(refreshMembers, 400);
}

/** Re-reads the open conversation's members and who of them is online (or a room's head count). */
async function refreshMembers() {
  const cid = chat.current;
  const conv = cid && chat.conversations.get(cid);
  if (!conv || !chat.conn || !chat.conn.ready) return;
  try {
    if (conv.room) {
      const reply = await chat.conn.request({ cmd: 'conv', op: 'count', cid });
      if (chat.current === cid) chat.roomCount = reply.count;
    } else {
      const fresh = await fetchConversation(cid);
      if (fresh && chat.current === cid) {
        Object.assign(conv, { members: fresh.members, name: fresh.name, attr: fresh.attr, ttl: fresh.ttl });
      }
      const ids = (conv.members || []).slice(0, 100);
      const online = new Set();
      for (let i = 0; i < ids.length; i += 20) {
        const reply = await chat.conn.request({ cmd: 'session', op: 'query', sessionPeerIds: ids.slice(i, i + 20) });
        for (const id of reply.onlineSessionPeerIds || []) online.add(id);
      }
      if (chat.current === cid) chat.online = online;
    }
  } catch { /* keep what is shown */ }
  if (chat.current === cid) {
    renderHeader();
    renderMembers();
    updateComposer();
  }
}

function renderMembers() {
  const list = $('#member-list');
  const note = $('#member-note');
  const count = $('#member-count');
  const conv = chat.current && chat.conversations.get(chat.current);
  $('#invite-form').hidden = !(conv && !conv.room && isMember(conv));
  list.replaceChildren();
  count.textContent = '';
  if (!conv) { note.textContent = 'Open a conversation to see its members.'; return; }
  if (conv.room) {
    count.textContent = chat.roomCount == null ? '' : `${chat.roomCount} online`;
    note.textContent = 'A chat room keeps no member list: whoever is in it while online gets its messages.';
    return;
  }
  if (!conv.members) { note.textContent = 'Join the conversation to see its members.'; return; }
  const bot = chat.info && chat.info.bot;
  const rank = (id) => (id === chat.me ? 0 : id === bot ? 1 : 2);
  const members = [...conv.members].sort((a, b) => rank(a) - rank(b) || a.localeCompare(b));
  count.textContent = String(members.length);
  note.textContent = members.length ? '' : 'Nobody is in this conversation.';
  for (const id of members) {
    const online = chat.online.has(id);
    list.append(h('li', { dataset: { member: id } },
      h('span', { class: `presence${online ? ' online' : ''}`, title: online ? 'online' : 'offline', attrs: { 'aria-label': online ? 'online' : 'offline' } }),
      avatar(id, true),
      h('span', { class: 'member-name', text: id, title: id === conv.creator ? `${id} (created the conversation)` : id }),
      id === chat.me ? badge('you', 'accent') : null,
      id === bot ? badge('bot', 'ok') : null));
  }
}

// ---------- Rendering: list, header, messages

function renderConversationList() {
  const list = $('#conversation-list');
  const focusedCid = document.activeElement && document.activeElement.closest && document.activeElement.closest('#conversation-list [data-cid]');
  const lobby = chat.info && chat.info.lobby;
  const convs = [...chat.conversations.values()].sort((a, b) => (b.id === lobby) - (a.id === lobby) || (b.lm || 0) - (a.lm || 0));
  list.replaceChildren(...convs.map(conversationItem));
  $('#conversation-empty').hidden = convs.length > 0 || !chat.me;
  if (focusedCid) {
    const again = list.querySelector(`[data-cid="${CSS.escape(focusedCid.dataset.cid)}"] button`);
    if (again) again.focus();
  }
}

function conversationItem(conv) {
  const unread = chat.unread.get(conv.id) || 0;
  const meta = [];
  if (conv.room) meta.push('chat room');
  else if (conv.temp) meta.push('temporary');
  if (conv.members) meta.push(plural(conv.members.length, 'member'));
  else if (!conv.room) meta.push('public · not joined');
  if (conv.lm) meta.push(formatTime(conv.lm));
  const active = conv.id === chat.current;
  return h('li', { class: active ? 'active' : '', dataset: { cid: conv.id } },
    h('button', { type: 'button', title: conv.id, attrs: { 'aria-current': active ? 'true' : null }, on: { click: () => openFromList(conv.id) } },
      h('span', { class: 'conv-icon', text: conv.room ? '#' : ([...displayName(conv)][0] || '?').toUpperCase(), attrs: { 'aria-hidden': 'true' } }),
      h('span', { class: 'conv-text' }, h('span', { class: 'conv-name', text: displayName(conv) }), h('span', { class: 'conv-meta', text: meta.join(' · ') })),
      unread ? h('span', { class: 'unread-badge', text: unread > 99 ? '99+' : String(unread), title: `${unread} unread` }) : null));
}

async function openFromList(cid) {
  try {
    await openConversation(cid);
    if (window.matchMedia('(max-width: 760px)').matches) $('.chat-main').scrollIntoView({ behavior: 'smooth', block: 'start' });
  } catch (error) {
    toast('error', 'Could not open the conversation', [errorText(error)]);
  }
}

function renderHeader() {
  const conv = chat.current && chat.conversations.get(chat.current);
  const title = $('#conversation-title');
  const sub = $('#conversation-sub');
  $('#leave-button').hidden = !(conv && isMember(conv));
  if (!conv) {
    title.textContent = 'No conversation open';
    sub.replaceChildren();
    return;
  }
  title.textContent = displayName(conv);
  const parts = [];
  if (conv.room) parts.push(badge('chat room', 'info'));
  if (conv.temp) parts.push(badge(conv.ttl != null ? `temporary · ${formatDuration(conv.ttl - (Date.now() - conv.fetchedAt) / 1000)} left` : 'temporary', 'warn'));
  if (conv.unique) parts.push(badge('unique'));
  if (conv.attr.public === true) parts.push(badge('public', 'ok'));
  if (!conv.room && !isMember(conv)) parts.push(badge('not a member', 'danger'));
  parts.push(h('code', { text: conv.id, title: 'Conversation id' }));
  sub.replaceChildren(...parts);
}

function setMessagesEmpty(text, action = null) {
  const box = $('#messages-empty');
  box.hidden = false;
  box.replaceChildren(h('div', {}, h('p', { text }), action));
}

/** Renders the open conversation's messages from its store. */
function renderMessages({ keepOffset = false } = {}) {
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
function placeMessage(rec) {
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

function refreshMessage(rec) { if (rec.node) fillMessage(rec); }

function messageNode(rec) {
  if (!rec.node) rec.node = document.createElement('div');
  fillMessage(rec);
  return rec.node;
}

/** Typed JSON (`_lctype` an integer), or null for other bodies. */
function parseTyped(body) {
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
  if (rec.action === 'card.click' && typeof cardClickText === 'function') return { text: cardClickText(rec), badges: [badge('card click', 'info'), ...badges] };
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
  const card = type === 100 && typeof cardView === 'function' ? cardView(rec, typed) : null; // cards.js
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

/** A stored file's current URL from `GET /1.1/files/<objId>` (with this client's session token), on the
 *  IM server; null when it cannot be had. Asked once a minute at most per file. */
const freshUrls = new Map();
function freshFileUrl(objId) {
  const known = freshUrls.get(objId);
  if (known && Date.now() - known.at < 60000) return known.url;
  const url = (async () => {
    const response = await fetch(new URL(`1.1/files/${enc(objId)}`, serverBase()), {
      headers: chat.st ? { 'X-LC-Session': chat.st } : {}, credentials: 'omit', referrerPolicy: 'no-referrer',
    });
    const body = response.ok ? await response.json() : null;
    const given = body && mediaUrl(body.url);
    return given ? onServer(given) : null;
  })().catch(() => null);
  freshUrls.set(objId, { at: Date.now(), url });
  return url;
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

// ---------- Composer

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

function updateComposer() {
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

function renderCustomTypes() {
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
function renderCustomFields() {
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

async function sendFromComposer() {
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
async function deliver(rec, content) {
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

// ---------- Uploads

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
function uploadNode(rec) {
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

// ---------- Chat forms and controls

function wireChat() {
  $('#login-form').addEventListener('submit', async (event) => {
    event.preventDefault();
    const input = $('#login-client-id');
    const button = $('#login-button');
    const id = input.value.trim();
    if (!id) { input.focus(); return; }
    showFormError($('#login-error'), '');
    button.disabled = true;
    button.textContent = 'Logging in…';
    try {
      await login(id);
    } catch (error) {
      const conn = chat.conn;
      chat.conn = null;
      resetChat();
      if (conn) conn.close();
      setStatus('error', 'Not connected');
      showFormError($('#login-error'), errorText(error));
    } finally {
      button.disabled = false;
      button.textContent = 'Log in';
    }
  });

  $('#logout-button').addEventListener('click', logout);
  $('#refresh-conversations').addEventListener('click', () => {
    refreshConversations().catch((error) => toast('error', 'Could not refresh', [errorText(error)]));
  });
  $('#open-lobby').addEventListener('click', async () => {
    try {
      await ensureMember(chat.info.lobby);
      await openConversation(chat.info.lobby);
    } catch (error) {
      toast('error', 'Could not open the lobby', [errorText(error)]);
    }
  });

  const composer = $('#composer');
  composer.addEventListener('submit', (event) => { event.preventDefault(); sendFromComposer(); });
  const text = $('#composer-text');
  text.addEventListener('keydown', (event) => {
    if (event.key === 'Enter' && !event.shiftKey && !event.isComposing) {
      event.preventDefault();
      if (!$('#send-button').disabled) composer.requestSubmit();
    }
  });
  text.addEventListener('input', () => {
    text.style.height = '';
    text.style.height = `${Math.min(text.scrollHeight + 2, 144)}px`;
  });
  $('#composer-kind').addEventListener('change', () => {
    showFormError($('#composer-error'), '');
    if ($('#composer-kind').value === 'custom') loadTypes();
    updateComposer();
  });
  $('#composer-transient').addEventListener('change', updateComposer);
  wireUploads();
  $('#composer-custom-type').addEventListener('change', renderCustomFields);

  const messages = $('#messages');
  messages.addEventListener('scroll', () => {
    chat.stick = messages.scrollHeight - messages.scrollTop - messages.clientHeight < 60;
  });

  $('#create-transient').addEventListener('change', (event) => {
    $('#create-temp').disabled = event.target.checked;
    if (event.target.checked) { $('#create-temp').checked = false; $('#create-ttl-row').hidden = true; }
  });
  $('#create-temp').addEventListener('change', (event) => {
    $('#create-ttl-row').hidden = !event.target.checked;
    $('#create-transient').disabled = event.target.checked;
    $('#create-unique').disabled = event.target.checked;
  });
  $('#create-form').addEventListener('submit', async (event) => {
    event.preventDefault();
    const error = $('#create-error');
    const submit = event.target.querySelector('button[type="submit"]');
    // The creator is listed among the members, as LeanCloud's SDKs send and sign it: a signed start with
    // no members would have a login's text, and the server refuses it.
    const members = [chat.me, ...new Set($('#create-members').value.split(/[\s,]+/).filter((id) => id && id !== chat.me))];
    const command = { cmd: 'conv', op: 'start', m: members };
    const name = $('#create-name').value.trim();
    if (name) command.name = name;
    const room = $('#create-transient').checked;
    const temp = $('#create-temp').checked;
    if (room) command.transient = true;
    if (temp) {
      command.tempConv = true;
      command.tempConvTTL = Number($('#create-ttl').value) || 86400;
    } else if ($('#create-unique').checked) command.unique = true;
    showFormError(error, '');
    submit.disabled = true;
    try {
      const reply = await chat.conn.request(await signed(command, 'start', { members }));
      if (temp) rememberTemp(reply.cid);
      if (room) await joinConversation(reply.cid);
      await refreshConversations();
      await openConversation(reply.cid);
      event.target.reset();
      $('#create-ttl-row').hidden = true;
      for (const id of ['#create-temp', '#create-transient', '#create-unique']) $(id).disabled = false;
      $('#create-section').open = false;
    } catch (problem) {
      showFormError(error, errorText(problem));
    } finally {
      submit.disabled = false;
    }
  });

  $('#join-form').addEventListener('submit', async (event) => {
    event.preventDefault();
    const error = $('#join-error');
    const cid = $('#join-cid').value.trim();
    showFormError(error, '');
    try {
      await joinConversation(cid);
      await refreshConversations();
      await openConversation(cid);
      event.target.reset();
      $('#join-section').open = false;
    } catch (problem) {
      showFormError(error, errorText(problem));
    }
  });

  $('#invite-form').addEventListener('submit', async (event) => {
    event.preventDefault();
    const error = $('#invite-error');
    const cid = chat.current;
    const ids = [...new Set($('#invite-ids').value.split(/[\s,]+/).filter(Boolean))];
    if (!cid || !ids.length) return;
    showFormError(error, '');
    try {
      const reply = await chat.conn.request(await signed({ cmd: 'conv', op: 'add', cid, m: ids }, 'invite', { cid, members: ids }));
      const failed = (reply.failedPids || []).map((f) => `${(f.pids || []).join(', ')}: ${f.code} ${f.reason}`);
      if (failed.length) showFormError(error, failed.join('; '));
      event.target.reset();
      refreshMembersSoon();
    } catch (problem) {
      showFormError(error, errorText(problem));
    }
  });

  $('#leave-button').addEventListener('click', async () => {
    const cid = chat.current;
    const conv = cid && chat.conversations.get(cid);
    if (!conv) return;
    try {
      await chat.conn.request({ cmd: 'conv', op: 'quit', cid });
      if (chat.room === cid) chat.room = null;
      if (conv.members) conv.members = conv.members.filter((id) => id !== chat.me);
      systemLine(cid, 'You left');
      await refreshConversations();
      if (!chat.conversations.has(cid) || conv.room) chat.current = null;
      renderConversationList();
      renderHeader();
      renderMembers();
      renderMessages();
      updateComposer();
    } catch (error) {
      toast('error', 'Could not leave', [errorText(error)]);
    }
  });

  // Keep presence fresh and send read marks when the tab comes back.
  setInterval(() => { if (activeTab === 'chat' && !document.hidden && chat.current) refreshMembers(); }, 15000);
  document.addEventListener('visibilitychange', () => { if (!document.hidden) markReadSoon(); });
}

/** The file picker, drag-and-drop onto the conversation, and files pasted into the message box. */
function wireUploads() {
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

// ============================================================== Plugins

const pluginsView = {
  cards: new Map(), // name → card (see createPluginCard)
  expanded: new Set(), // plugins whose state table is open
  poller: null,
};

async function pollPlugins() {
  if (!Token.get()) return;
  pollSchedules(); // schedules.js
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

function reloadAll() {
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

// ============================================================== Log

const LOG_MAX = 2000;
const LOG_PAGE = 1000;

const logView = {
  after: 0,
  paused: false,
  stick: true,
  generation: 0, // bumped when the filters change, so late answers are dropped
  pluginsFetched: 0,
  poller: null,
};

function setLogPlugins(names) {
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

async function pollLog() {
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

function wireLog() {
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

// ============================================================== Interception

const VERDICT_LABELS = { allow: 'Allowed', block: 'Blocked', replace: 'Replaced' };
const POLICY_LABELS = {
  total: ['Decided by the policy', 'no usable verdict in time, so the failure policy decided'],
  declined: ['Declined', 'the bot answered “none” (could not review in time)'],
  invalid: ['Invalid answers', 'answers that were not a verdict'],
  delivered: ['Delivered by the policy', 'fail-open decisions'],
  refused: ['Refused by the policy', 'fail-closed decisions'],
};
const STAT_LABELS = {
  messages: ['Messages', 'stored messages the plugins saw'],
  blocked: ['Blocked', 'messages the plugins refused'],
  commands: ['Cmd messages', 'handled by on_cmd'],
  transients: ['Transient', 'handled by on_transient'],
  events: ['Events', 'membership changes and other events'],
  sent: ['Sent', 'messages the bot sent'],
  dropped: ['Dropped', 'bot messages not sent (loop guard, limits)'],
  rateLimited: ['Rate-limited', 'bot messages held back by the reply limits'],
  verdicts: ['Verdicts', 'interception requests the bot answered'],
  undecided: ['Undecided', 'answered “none”: the review ran out of time'],
  actionErrors: ['Action errors', 'plugin actions that failed'],
};

const interceptionView = { poller: null };

function statTile(label, value, hint, tone = '') {
  return h('div', { class: `card stat ${tone}`.trim() },
    h('span', { class: 'label', text: label }),
    h('span', { class: 'value', text: formatNumber(value) }),
    hint ? h('span', { class: 'hint', text: hint }) : null);
}

function headItem(label, value) {
  return h('div', { class: 'item' }, h('span', { class: 'label', text: label }), h('span', { class: 'value' }, value));
}

async function pollInterception() {
  if (!Token.get()) return;
  const notice = $('#interception-error');
  try {
    const [interception, stats] = await Promise.all([api('/api/interception', { admin: true }), api('/api/stats', { admin: true })]);
    renderInterception(interception || {});
    renderStats(stats || {});
    await pollRecentVerdicts(); // trace.js
    await pollPushes();
    renderPushStats();
    showFormError(notice, '');
  } catch (error) {
    if (error.status !== 401) showFormError(notice, `Could not read the interception counters: ${error.reason}`);
  }
}

function renderInterception(ic) {
  const policy = ic.policy || '—';
  const closed = /closed/.test(policy);
  const head = h('div', { class: 'card interception-head' },
    headItem('Interceptor', ic.interceptor || '—'),
    headItem('Attached', ic.attached == null ? '—' : badge(ic.attached ? 'attached' : 'not attached', ic.attached ? 'ok' : 'danger')),
    headItem('Failure policy', badge(policy, closed ? 'warn' : 'info')),
    headItem('Deadline', ic.deadlineMillis != null ? `${formatNumber(ic.deadlineMillis)} ms` : '—'),
    ic.reviewsInFlight != null ? headItem('Reviews in flight', formatNumber(ic.reviewsInFlight)) : null);
  const parts = [head];
  if (ic.requests == null) {
    parts.push(h('p', { class: 'notice info', text: 'The IM server runs in another process, so only the bot\'s side of interception is known here.' }));
  } else {
    const verdicts = ic.verdicts || {};
    const tiles = [statTile('Requests', ic.requests, 'messages and membership changes sent for review')];
    for (const [kind, count] of Object.entries(verdicts)) tiles.push(statTile(VERDICT_LABELS[kind] || kind, count, `verdict “${kind}”`, kind === 'block' && count ? 'bad' : ''));
    tiles.push(statTile('Timeouts', ic.timeouts, 'no verdict within the deadline', ic.timeouts ? 'bad' : ''));
    for (const [kind, count] of Object.entries(ic.policyDecisions || {})) {
      const [label, hint] = POLICY_LABELS[kind] || [`Policy: ${kind}`, ''];
      tiles.push(statTile(label, count, hint, count ? 'bad' : ''));
    }
    parts.push(h('div', { class: 'stat-grid' }, tiles));
    const total = Object.values(verdicts).reduce((sum, n) => sum + (Number(n) || 0), 0);
    const colour = (kind) => (kind === 'allow' ? 'c-allow' : kind === 'block' ? 'c-block' : kind === 'replace' ? 'c-replace' : 'c-other');
    parts.push(h('div', { class: 'card verdict-card' },
      h('h3', { text: `Verdicts by kind · ${formatNumber(total)}` }),
      h('div', { class: 'verdict-bar', attrs: { role: 'img', 'aria-label': Object.entries(verdicts).map(([k, n]) => `${k} ${n}`).join(', ') } },
        total ? Object.entries(verdicts).filter(([, n]) => n > 0).map(([kind, n]) => {
          const bar = h('span', { class: colour(kind), title: `${kind}: ${n}` });
          bar.style.width = `${(100 * n) / total}%`;
          return bar;
        }) : null),
      h('div', { class: 'verdict-legend' }, Object.entries(verdicts).map(([kind, n]) => h('span', {},
        h('span', { class: `swatch ${colour(kind)}` }), `${VERDICT_LABELS[kind] || kind} ${formatNumber(n)}${total ? ` (${Math.round((100 * n) / total)}%)` : ''}`)))));
  }
  if (ic.bot && typeof ic.bot === 'object') {
    parts.push(h('div', {}, h('h3', { class: 'subhead', text: `The bot (${ic.interceptor || 'interceptor'})` }),
      h('div', { class: 'stat-grid' }, Object.entries(ic.bot).map(([key, value]) => {
        const [label, hint] = STAT_LABELS[key] || [key, ''];
        return statTile(label, value, hint);
      }))));
  }
  $('#interception-summary').replaceChildren(...parts);
}

function renderStats(stats) {
  $('#bot-stats').replaceChildren(...Object.entries(stats).map(([key, value]) => {
    const [label, hint] = STAT_LABELS[key] || [key, ''];
    const bad = ['actionErrors', 'dropped', 'undecided'].includes(key) && value > 0;
    return statTile(label, value, hint, bad ? 'bad' : '');
  }));
}

// ============================================================== Last pushes (chat) and push counters (interception)

const PUSH_KEEP = 200;
const PUSH_OUTCOMES = {
  delivered: ['delivered', 'ok'],
  retry: ['retry', 'warn'],
  device_gone: ['device gone', 'danger'],
  rejected: ['rejected', 'danger'],
  expired: ['expired', 'danger'],
  dropped: ['dropped', 'danger'],
};

const pushesView = { after: 0, entries: [], enabled: null, reason: '', providers: {}, poller: null };

/** Reads the pushes recorded since the last poll (every push of every conversation; the panel shows the open one's). */
async function pollPushes() {
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

function renderPushes() {
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
    const [label, tone] = PUSH_OUTCOMES[entry.outcome] || [entry.outcome, 'info'];
    return h('li', { class: 'push-item', dataset: { receiver: entry.receiver, outcome: entry.outcome, seq: String(entry.seq) } },
      h('div', { class: 'push-line' }, avatar(entry.receiver, true), h('span', { class: 'member-name', text: entry.receiver }),
        badge(entry.provider, 'info'), badge(label, tone), entry.badge != null ? badge(`badge ${entry.badge}`, 'accent') : null),
      entry.title ? h('div', { class: 'push-title', text: entry.title }) : null,
      h('div', { class: 'push-body', text: entry.body != null ? entry.body : '(no text: a background push)' }),
      h('div', { class: 'push-meta', text: [formatTime(entry.time, true), `device ${entry.device}`, entry.attempts > 1 ? `attempt ${entry.attempts}` : '',
        entry.reason || ''].filter(Boolean).join(' · '), title: `message ${entry.messageID}` }));
  }));
}

function renderPushStats() {
  const node = $('#push-stats');
  if (pushesView.enabled === false) { node.replaceChildren(h('p', { class: 'notice info', text: pushesView.reason })); return; }
  const providers = Object.entries(pushesView.providers || {}).sort(([a], [b]) => a.localeCompare(b));
  if (!providers.length) { node.replaceChildren(h('p', { class: 'muted', text: 'No push attempt yet.' })); return; }
  const failed = (counts) => (counts.rejected || 0) + (counts.device_gone || 0) + (counts.expired || 0);
  node.replaceChildren(...providers.map(([name, counts]) => statTile(name, counts.delivered || 0,
    `sent · ${formatNumber(failed(counts))} failed · ${formatNumber(counts.dropped || 0)} dropped · ${formatNumber(counts.retry || 0)} retried`,
    failed(counts) || counts.dropped ? 'bad' : '')));
}

// ============================================================== Tabs and start-up

// moderation: moderation.js (loaded before this file)
const TABS = ['chat', 'plugins', 'log', 'interception', 'moderation'];
const ADMIN_TABS = ['plugins', 'log', 'interception', 'moderation'];
let activeTab = 'chat';

function pollers() {
  return { chat: pushesView.poller, plugins: pluginsView.poller, log: logView.poller, interception: interceptionView.poller,
    moderation: moderationView.poller };
}

/** Runs the visible admin panel's poller only. */
function syncPollers() {
  for (const [name, poller] of Object.entries(pollers())) {
    if (name === activeTab && !document.hidden && Token.get()) poller.start(); else poller.stop();
  }
}

function selectTab(name, focus = false) {
  if (!TABS.includes(name)) name = 'chat';
  activeTab = name;
  for (const tab of TABS) {
    const button = $(`#tab-${tab}`);
    const selected = tab === name;
    button.setAttribute('aria-selected', String(selected));
    button.tabIndex = selected ? 0 : -1;
    $(`#panel-${tab}`).hidden = !selected;
  }
  if (focus) $(`#tab-${name}`).focus();
  tabStore.set('hookbot.tab', name);
  updateGates();
  syncPollers();
}

function wireTabs() {
  for (const tab of TABS) $(`#tab-${tab}`).addEventListener('click', () => selectTab(tab));
  $('.tabs').addEventListener('keydown', (event) => {
    const step = { ArrowRight: 1, ArrowLeft: -1 }[event.key];
    if (!step) return;
    event.preventDefault();
    selectTab(TABS[(TABS.indexOf(activeTab) + step + TABS.length) % TABS.length], true);
  });
  document.addEventListener('visibilitychange', syncPollers);
}

function wireToken() {
  $('#token-form').addEventListener('submit', (event) => {
    event.preventDefault();
    const value = $('#token-input').value.trim();
    if (!value) return;
    tokenMessage = '';
    Token.set(value);
    $('#token-input').value = '';
    updateGates();
    syncPollers();
  });
  // Pasting a console address with #token=… into a tab that is already open.
  window.addEventListener('hashchange', () => {
    if (!/token=/.test(location.hash)) return;
    Token.takeFromURL();
    tokenMessage = '';
    updateGates();
    syncPollers();
  });
  $('#token-button').addEventListener('click', () => {
    if (Token.get()) {
      Token.set('');
      tokenMessage = 'The admin token was forgotten for this tab.';
      updateGates();
      syncPollers();
    } else {
      if (!ADMIN_TABS.includes(activeTab)) selectTab('plugins');
      $('#token-input').focus();
    }
  });
}

function start() {
  $('#panel-plugins .token-gate').append($('#token-form-template').content.cloneNode(true));
  Token.takeFromURL();
  pluginsView.poller = new Poller(pollPlugins, 2000);
  logView.poller = new Poller(pollLog, 1000);
  interceptionView.poller = new Poller(pollInterception, 2000);
  pushesView.poller = new Poller(pollPushes, 1000);
  wireTabs();
  wireToken();
  wireChat();
  wireLog();
  wireModeration();
  $('#reload-all').addEventListener('click', reloadAll);
  updateTokenButton();
  selectTab(tabStore.get('hookbot.tab') || 'chat');
  renderCustomTypes();
  updateComposer();

  const saved = tabStore.get('hookbot.clientId');
  loadInfo().catch((error) => {
    $('#login-info').textContent = `The server's details could not be loaded (${errorText(error)}); logging in tries again.`;
  }).finally(() => {
    if (saved && !chat.me) {
      $('#login-client-id').value = saved;
      $('#login-form').requestSubmit();
    }
  });
  if (!saved) $('#login-client-id').focus();
}

start();
