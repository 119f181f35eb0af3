// Hookbot console: the page's state, in one place. `chat` is the sandbox client's (who is logged in, the
// connection, conversations, each conversation's messages, timers); `ui` the tabs' and the admin token's.
// Modules read it directly; the changes that touch several fields at once go through the functions below,
// so they stay whole. `tabStore` keeps what survives a reload of the tab (sessionStorage). No DOM.

/** sessionStorage (per tab), tolerant of storage being unavailable. */
export const tabStore = {
  get(key) { try { return sessionStorage.getItem(key); } catch { return null; } },
  set(key, value) {
    try { if (value == null || value === '') sessionStorage.removeItem(key); else sessionStorage.setItem(key, value); } catch { /* storage off */ }
  },
  getJSON(key, fallback) { try { return JSON.parse(this.get(key)) ?? fallback; } catch { return fallback; } },
  setJSON(key, value) { this.set(key, JSON.stringify(value)); },
};

export const HISTORY_PAGE = 50;

/** The sandbox chat client's state. */
export const chat = {
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

export const serverNow = () => Date.now() + chat.skew;
export const lastConversationKey = () => `hookbot.cid.${chat.me}`;
export const tempKey = () => `hookbot.temp.${chat.me}`;

export function storeFor(cid) {
  let store = chat.stores.get(cid);
  if (!store) {
    store = { list: [], byId: new Map(), hasOlder: false, loaded: false, readUpTo: 0 };
    chat.stores.set(cid, store);
  }
  return store;
}

export function newRecord(fields) {
  return { key: `m${++chat.localSerial}`, deliveredTo: new Set(), readBy: new Set(), ...fields };
}

export function addRecord(store, rec) {
  store.list.push(rec);
  if (rec.mid) store.byId.set(rec.mid, rec);
}

export function tempIds() { return tabStore.getJSON(tempKey(), []); }
export function rememberTemp(cid) { tabStore.setJSON(tempKey(), [...new Set([...tempIds(), cid])].slice(-100)); }

/** The tabs' state: the visible tab, and why the admin panels are locked (shown above the token form). */
export const ui = { activeTab: 'chat', tokenMessage: '' };

export function setActiveTab(name) { ui.activeTab = name; }
export function setTokenMessage(text) { ui.tokenMessage = text; }

/** A session was opened on the current connection: its token and the server's clock. */
export function sessionOpened(reply) {
  chat.st = reply.st || null;
  if (typeof reply.t === 'number') chat.skew = reply.t - Date.now();
  chat.room = null;
}

/** Takes the connection away from the state (the caller closes it). */
export function takeConnection() {
  const conn = chat.conn;
  chat.conn = null;
  return conn;
}

/** Forgets everything of the logged-in user: timers stopped, uploads aborted, conversations and messages dropped. */
export function forgetUser() {
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
}

/** Makes `cid` the open conversation (who is online and a room's head count are then unknown) and clears its
 *  unread count. */
export function selectConversation(cid) {
  if (chat.current !== cid) {
    chat.current = cid;
    chat.online.clear();
    chat.roomCount = null;
    chat.stick = true;
  }
  tabStore.set(lastConversationKey(), cid);
  chat.unread.delete(cid);
}

/** The conversation list as the server gave it, keeping the open one if it is no longer listed. */
export function replaceConversations(next) {
  const current = chat.current && chat.conversations.get(chat.current);
  if (current && !next.has(current.id)) next.set(current.id, current); // still open here
  chat.conversations = next;
}
