// Hookbot console, chat: connecting, logging in (signed when the server requires it), reconnecting and
// logging out.

import { api, errorText, Token } from './api.js';
import { renderCustomTypes, updateComposer } from './composer.js';
import { openConversation, openInitialConversation, refreshConversations, renderHeader, renderMembers } from './conversations.js';
import { $, avatar, showFormError, toast } from './dom.js';
import { onEvent } from './events.js';
import { wsURL } from './media.js';
import { renderMessages } from './messages.js';
import { ImConnection, nextReconnectDelay, ProtocolError } from './protocol.js';
import { chat, forgetUser, sessionOpened, tabStore, takeConnection } from './state.js';

export function setStatus(state, text) {
  const pill = $('#connection-status');
  pill.dataset.state = state;
  pill.textContent = text;
}

export async function loadInfo() {
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

export async function loadTypes() {
  try {
    const types = await api('/api/types');
    chat.types = Array.isArray(types) ? types : [];
  } catch (error) {
    chat.types = [];
    showFormError($('#composer-error'), `Custom types could not be loaded: ${errorText(error)}`);
  }
  renderCustomTypes();
}

/** Adds `t`, `n`, `s` from POST /api/sign when the server requires signatures. */
export async function signed(command, action, { cid, members } = {}) {
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
  let reply;
  try {
    if (chat.st && chat.info && chat.info.signatures) {
      try {
        reply = await conn.openSession(chat.me, { st: chat.st });
      } catch (error) {
        if (error.code !== 4112) throw error;
        chat.st = null;
      }
    }
    if (!reply) reply = await conn.openSession(chat.me, await signed({}, 'open'));
  } catch (error) {
    conn.close();
    throw error;
  }
  sessionOpened(reply);
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
  chat.reconnectDelay = nextReconnectDelay(delay);
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

export async function login(clientId) {
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

/** Forgets everything of the logged-in user and shows the login screen; returns the connection, which the
 *  caller closes. */
export function endSession() {
  const conn = takeConnection();
  forgetUser();
  $('#conversation-list').replaceChildren();
  $('#messages').replaceChildren();
  $('#login-screen').hidden = false;
  $('#chat-layout').hidden = true;
  $('#current-user').textContent = '';
  document.title = 'Hookbot console';
  return conn;
}

export async function logout() {
  const conn = endSession();
  tabStore.set('hookbot.clientId', null);
  if (conn && conn.isOpen) {
    try { await conn.request({ cmd: 'session', op: 'close' }, 3000); } catch { /* closing anyway */ }
    conn.close();
  }
  setStatus('offline', 'Chat offline');
  $('#login-client-id').focus();
}

/** The server ended the session (e.g. 4111) or refuses to log in again. */
export function forcedLogout(message) {
  const id = chat.me;
  const conn = endSession();
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
