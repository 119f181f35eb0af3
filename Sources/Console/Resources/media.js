// Hookbot console: where the IM server is (its WebSocket and HTTP origin) and which file URLs the page
// may load from it.

import { enc } from './format.js';
import { chat } from './state.js';

/** Only http(s) URLs become links or images (no javascript: and the like). */
export function safeUrl(value) {
  if (typeof value !== 'string' || !value) return null;
  try {
    const url = new URL(value, location.href);
    return url.protocol === 'http:' || url.protocol === 'https:' ? url.href : null;
  } catch { return null; }
}

/** The IM server's HTTP address: this page's origin with an embedded server, else where the remote bot's
 *  server is (its WebSocket's folder, ws → http, wss → https). Uploads go there, and the files shown inline
 *  come from there only (the page's CSP allows no other). */
export function serverBase() {
  const url = new URL('.', wsURL());
  url.protocol = url.protocol === 'wss:' ? 'https:' : 'http:';
  url.search = '';
  return url;
}
export const serverOrigin = () => serverBase().origin;

/** A message's file URL as a URL object (a bare path resolved against the IM server), or null if it is
 *  not http(s). */
export function mediaUrl(value) {
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
export function onServer(url) {
  if (url.origin === serverOrigin()) return url;
  const at = url.pathname.search(/\/media\/[\w-]{1,64}(\/|$)/);
  return at < 0 ? null : new URL(url.pathname.slice(at + 1), serverBase());
}

/** LeanCloud's thumbnail form (AV.File#thumbnailURL): the file's URL + `?imageView/2/w/W/h/H`. */
export const THUMBNAIL_SIZE = 320;
export const thumbnailUrl = (url) => (url.search ? null : `${url.href}?imageView/2/w/${THUMBNAIL_SIZE}/h/${THUMBNAIL_SIZE}`);

/** The chat's WebSocket: `ws` from GET /api/info (this origin's /ws, or the absolute URL of a remote
 *  bot's server), resolved against this page. */
export function wsURL() {
  const url = new URL((chat.info && chat.info.ws) || '/ws', location.href);
  if (url.protocol === 'https:' || url.protocol === 'http:') url.protocol = url.protocol === 'https:' ? 'wss:' : 'ws:';
  url.hash = '';
  return url.href;
}

/** A stored file's current URL from `GET /1.1/files/<objId>` (with this client's session token), on the
 *  IM server; null when it cannot be had. Asked once a minute at most per file. */
const freshUrls = new Map();
export function freshFileUrl(objId) {
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
