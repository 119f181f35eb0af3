// Hookbot console, chat: the conversation list, opening and joining, history, members and who is online.

import { errorText } from './api.js';
import { updateComposer } from './composer.js';
import { $, avatar, badge, h, toast } from './dom.js';
import { isRecalledBody, markReadSoon, mentionsMe } from './events.js';
import { formatDuration, formatTime, plural } from './format.js';
import { refreshMessage, renderMessages, setMessagesEmpty } from './messages.js';
import { renderPushes } from './pushes.js';
import { signed } from './session.js';
import { addRecord, chat, HISTORY_PAGE, lastConversationKey, newRecord, rememberTemp, replaceConversations, selectConversation, storeFor, tabStore, tempIds, tempKey } from './state.js';

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

export const isMember = (conv) => (conv.room ? chat.room === conv.id : Boolean(conv.members && conv.members.includes(chat.me)));

export function displayName(conv) {
  if (conv.name) return conv.name;
  const others = (conv.members || []).filter((id) => id !== chat.me);
  return others.length ? others.join(', ') : conv.id;
}

async function queryConversations(command) {
  const reply = await chat.conn.request({ cmd: 'conv', op: 'query', ...command });
  return Array.isArray(reply.results) ? reply.results : [];
}

/** Conversations the user is in, chat rooms and public conversations; temporary ones by id. */
export async function refreshConversations() {
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
  replaceConversations(next);
  renderConversationList();
}

export function scheduleListRefresh() {
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
export async function joinConversation(cid) {
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

export async function ensureMember(cid) {
  const conv = chat.conversations.get(cid) || await fetchConversation(cid);
  if (!conv) throw new Error(`There is no conversation ${cid} you can see.`);
  chat.conversations.set(cid, conv);
  if (!conv.room && !isMember(conv)) await joinConversation(cid);
}

export async function openInitialConversation() {
  const lobby = chat.info && chat.info.lobby;
  if (lobby) {
    try { await ensureMember(lobby); } catch (error) { toast('error', 'Could not join the lobby', [errorText(error)]); }
  }
  const last = tabStore.get(lastConversationKey());
  const target = last && chat.conversations.has(last) ? last : lobby && chat.conversations.has(lobby) ? lobby : null;
  if (target) await openConversation(target);
}

export async function openConversation(cid) {
  let conv = chat.conversations.get(cid);
  if (!conv) {
    conv = await fetchConversation(cid);
    if (!conv) throw new Error(`There is no conversation ${cid} you can see.`);
    chat.conversations.set(cid, conv);
  }
  selectConversation(cid);
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
export async function loadHistory(cid, older = false) {
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

export function refreshMembersSoon() {
  clearTimeout(chat.membersTimer);
  chat.membersTimer = setTimeout(refreshMembers, 400);
}

/** Re-reads the open conversation's members and who of them is online (or a room's head count). */
export async function refreshMembers() {
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

export function renderMembers() {
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

export function renderConversationList() {
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

export function renderHeader() {
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
