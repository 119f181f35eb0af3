// Hookbot console, chat: what the server sends unasked (messages, receipts, recalls and edits, membership
// events), acknowledgements and read marks.

import { updateComposer } from './composer.js';
import { isMember, refreshMembersSoon, renderConversationList, renderHeader, renderMembers, scheduleListRefresh } from './conversations.js';
import { toast } from './dom.js';
import { parseTyped, placeMessage, refreshMessage } from './messages.js';
import { ProtocolError } from './protocol.js';
import { forcedLogout } from './session.js';
import { addRecord, chat, newRecord, rememberTemp, serverNow, storeFor } from './state.js';

export function onEvent(c) {
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

export const mentionsMe = (pids, all) => Boolean(all) || (Array.isArray(pids) && pids.includes(chat.me));

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

export function markReadSoon() {
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

export const isRecalledBody = (body) => { const t = parseTyped(body); return Boolean(t) && t._lctype === -127; };

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
export function systemLine(cid, text) {
  const store = storeFor(cid);
  let latest = 0;
  for (const rec of store.list) if (Number.isFinite(rec.ts) && rec.ts > latest) latest = rec.ts;
  const rec = newRecord({ system: true, cid, from: '', text, ts: Math.max(serverNow() - 1000, latest + 0.001) });
  addRecord(store, rec);
  if (cid === chat.current) placeMessage(rec);
}
