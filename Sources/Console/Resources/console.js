// Hookbot console: a sandbox chat client speaking the JSON protocol of docs/PROTOCOL.md over /ws, and
// views of the bot's internals through the admin HTTP API of docs/CONSOLE.md.
//
// This module starts the page: the tabs, the admin token's form and gates, and which poller runs. The rest
// is in ES modules beside it (docs/CONSOLE.md, "How the console's code is laid out"): protocol.js (the IM
// protocol client), state.js (the page's state), api.js (the admin API), a module per tab or part of the
// chat, and the feature modules (cards, trace, moderation, schedules, configeditor). No build step: the
// browser loads them as they are.

import { errorText, onLocked, Token } from './api.js';
import { wireChat } from './chatforms.js';
import { renderCustomTypes, updateComposer } from './composer.js';
import { wireConfigEditor } from './configeditor.js';
import { $, fill, h } from './dom.js';
import { interceptionView, pollInterception } from './interception.js';
import { logView, pollLog, wireLog } from './log.js';
import { moderationView, wireModeration } from './moderation.js';
import { pluginsView, pollPlugins, reloadAll } from './plugins.js';
import { Poller } from './poller.js';
import { pollPushes, pushesView, renderPushes } from './pushes.js';
import { loadInfo } from './session.js';
import { chat, setActiveTab, setTokenMessage, tabStore, ui } from './state.js';
import { wireTrace } from './trace.js';

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
  if (ADMIN_TABS.includes(ui.activeTab)) $(`#panel-${ui.activeTab} .token-gate`).append(form);
  $('#token-message').textContent = ui.tokenMessage
    || 'This part of the console shows and changes the bot\'s internals, so it needs the admin token.';
  renderPushes();
}

const TABS = ['chat', 'plugins', 'log', 'interception', 'moderation'];
const ADMIN_TABS = ['plugins', 'log', 'interception', 'moderation'];

function pollers() {
  return { chat: pushesView.poller, plugins: pluginsView.poller, log: logView.poller, interception: interceptionView.poller,
    moderation: moderationView.poller };
}

/** Runs the visible admin panel's poller only. */
function syncPollers() {
  for (const [name, poller] of Object.entries(pollers())) {
    if (name === ui.activeTab && !document.hidden && Token.get()) poller.start(); else poller.stop();
  }
}

function selectTab(name, focus = false) {
  if (!TABS.includes(name)) name = 'chat';
  setActiveTab(name);
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
    selectTab(TABS[(TABS.indexOf(ui.activeTab) + step + TABS.length) % TABS.length], true);
  });
  document.addEventListener('visibilitychange', syncPollers);
}

function wireToken() {
  $('#token-form').addEventListener('submit', (event) => {
    event.preventDefault();
    const value = $('#token-input').value.trim();
    if (!value) return;
    setTokenMessage('');
    Token.set(value);
    $('#token-input').value = '';
    updateGates();
    syncPollers();
  });
  // Pasting a console address with #token=… into a tab that is already open.
  window.addEventListener('hashchange', () => {
    if (!/token=/.test(location.hash)) return;
    Token.takeFromURL();
    setTokenMessage('');
    updateGates();
    syncPollers();
  });
  $('#token-button').addEventListener('click', () => {
    if (Token.get()) {
      Token.set('');
      setTokenMessage('The admin token was forgotten for this tab.');
      updateGates();
      syncPollers();
    } else {
      if (!ADMIN_TABS.includes(ui.activeTab)) selectTab('plugins');
      $('#token-input').focus();
    }
  });
}

function start() {
  $('#panel-plugins .token-gate').append($('#token-form-template').content.cloneNode(true));
  Token.onChange(updateTokenButton);
  onLocked(updateGates);
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
  wireConfigEditor();
  wireTrace();
}

start();
