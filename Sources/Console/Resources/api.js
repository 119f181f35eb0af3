// Hookbot console: the admin HTTP API of docs/CONSOLE.md (JSON in and out, the admin token in a header),
// the admin token kept for the tab, and a readable sentence for any error the page meets.
// The page talks to its own origin only: the admin API (and the token it carries) never goes anywhere
// else, whatever the address bar says. The chat's WebSocket is the one GET /api/info names (the bot's
// configured server for a remote bot), never one taken from the page's URL.

import { ProtocolError } from './protocol.js';
import { setTokenMessage, tabStore } from './state.js';

/** A human sentence for any error this page meets. */
export function errorText(error) {
  if (error instanceof ProtocolError) return error.message;
  if (error instanceof ApiError) return error.reason;
  return (error && error.message) || String(error);
}

/** Listeners of Token.onChange (the token set, forgotten or refused) and of onLocked (a call needed a token
 *  the tab has not got, or the server refused it: the page shows the token form). */
const tokenListeners = new Set();
const lockListeners = new Set();

/** Calls `listener` whenever the admin panels must lock (no token, or a refused one). */
export function onLocked(listener) { lockListeners.add(listener); }
const locked = () => { for (const listener of lockListeners) listener(); };

export const Token = {
  key: 'hookbot.adminToken',
  get() { return tabStore.get(this.key) || ''; },
  set(value) {
    tabStore.set(this.key, value || null);
    for (const listener of tokenListeners) listener();
  },
  onChange(listener) { tokenListeners.add(listener); },
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

class ApiError extends Error {
  constructor(status, reason) {
    super(reason);
    this.status = status;
    this.reason = reason;
  }
}

/** Calls the admin API; JSON in and out. Errors become ApiError with the server's `reason`.
 *  A 401 (or no token) locks the admin panels until a token is entered. */
export async function api(path, { method = 'GET', body, admin = false } = {}) {
  const headers = { Accept: 'application/json' };
  if (body !== undefined) headers['Content-Type'] = 'application/json';
  if (admin) {
    const token = Token.get();
    if (!token) {
      locked();
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
      setTokenMessage(`The server refused the token: ${reason}`);
      Token.set('');
      locked();
    }
    throw new ApiError(response.status, reason);
  }
  return data;
}
