// Hookbot console, chat: the login, create, join, invite and leave forms and the composer's controls.

import { errorText } from './api.js';
import { renderCustomFields, sendFromComposer, updateComposer } from './composer.js';
import { ensureMember, joinConversation, openConversation, refreshConversations, refreshMembers, refreshMembersSoon, renderConversationList, renderHeader, renderMembers } from './conversations.js';
import { $, showFormError, toast } from './dom.js';
import { markReadSoon, systemLine } from './events.js';
import { renderMessages } from './messages.js';
import { endSession, loadTypes, login, logout, setStatus, signed } from './session.js';
import { chat, rememberTemp, ui } from './state.js';
import { wireUploads } from './uploads.js';

export function wireChat() {
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
      const conn = endSession();
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
  setInterval(() => { if (ui.activeTab === 'chat' && !document.hidden && chat.current) refreshMembers(); }, 15000);
  document.addEventListener('visibilitychange', () => { if (!document.hidden) markReadSoon(); });
}
