// Hookbot console: the IM protocol client, the JSON protocol of docs/PROTOCOL.md over one WebSocket.
// A request carries a serial `i` and gets exactly one reply (or an error reply with its numeric code);
// everything else the server sends is an event. No DOM: Tests/ConsoleJS runs it in Node against a real
// server (`node --test --experimental-websocket`).

/** An error reply (`error`, a refused `ack`, or `session closed` answering a request). */
export class ProtocolError extends Error {
  constructor(reply) {
    super(`${reply.code} ${reply.reason || ''}${reply.detail ? `: ${reply.detail}` : ''}`.trim());
    this.code = reply.code;
    this.reason = reply.reason;
    this.detail = reply.detail;
    this.appCode = reply.appCode;
  }
}

export const isErrorReply = (c) => c.cmd === 'error' || (c.code != null && (c.cmd === 'ack' || (c.cmd === 'session' && c.op === 'closed')));

/** A request's frame: the command with its serial `i`, as the JSON text sent. */
export const requestFrame = (command, i) => JSON.stringify({ ...command, i });

/** A frame the server sent, as an object; null for anything that is not a JSON object. */
export function parseFrame(data) {
  let command;
  try { command = JSON.parse(data); } catch { return null; }
  return command && typeof command === 'object' && !Array.isArray(command) ? command : null;
}

/** The wait before the next reconnection attempt: doubled after each failure, at most `max` seconds. */
export const nextReconnectDelay = (delay, max = 30) => Math.min(delay * 2, max);

/** Requests waiting for their reply, by serial. A reply settles its request (an error reply rejects it with a
 *  ProtocolError); a frame that answers no waiting request is not a reply. */
export class PendingReplies {
  constructor() {
    this.serial = 0;
    this.waiting = new Map();
  }

  get size() { return this.waiting.size; }

  /** A new serial and the promise of its reply; rejected after `timeout` ms without one. */
  expect(timeout) {
    const i = ++this.serial;
    const reply = new Promise((resolve, reject) => {
      const timer = setTimeout(() => {
        this.waiting.delete(i);
        reject(new Error('The server did not answer in time.'));
      }, timeout);
      this.waiting.set(i, { resolve, reject, timer });
    });
    return { i, reply };
  }

  /** Settles the request `command` answers; false when it answers none (an event). */
  settle(command) {
    const waiter = command.i != null ? this.waiting.get(command.i) : undefined;
    if (!waiter) return false;
    this.waiting.delete(command.i);
    clearTimeout(waiter.timer);
    if (isErrorReply(command)) waiter.reject(new ProtocolError(command));
    else waiter.resolve(command);
    return true;
  }

  /** Rejects every waiting request (the connection closed). */
  failAll(error) {
    for (const waiter of this.waiting.values()) {
      clearTimeout(waiter.timer);
      waiter.reject(error);
    }
    this.waiting.clear();
  }
}

/** One WebSocket speaking the JSON protocol. `onEvent(command)` gets what is not a reply, `onClose(this, event)`
 *  the end of the connection. */
export class ImConnection {
  constructor(url, onEvent, onClose) {
    this.url = url;
    this.onEvent = onEvent;
    this.onClose = onClose;
    this.pending = new PendingReplies();
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
      const unreachable = () => new Error(`Could not connect to ${this.url}. Is the server running?`);
      this.socket.onopen = () => resolve();
      // A refused connection fires `error` then `close` in browsers; Node's WebSocket (undici) fires `error` only.
      this.socket.onerror = () => reject(unreachable());
      this.socket.onmessage = (event) => this.receive(event.data);
      this.socket.onclose = (event) => {
        reject(unreachable());
        this.pending.failAll(new Error('The connection was closed.'));
        this.onClose(this, event);
      };
    });
  }

  get isOpen() { return Boolean(this.socket) && this.socket.readyState === WebSocket.OPEN; }

  receive(data) {
    const command = parseFrame(data);
    if (command && !this.pending.settle(command)) this.onEvent(command);
  }

  request(command, timeout = 15000) {
    if (!this.isOpen) return Promise.reject(new Error('Not connected to the server.'));
    const { i, reply } = this.pending.expect(timeout);
    this.socket.send(requestFrame(command, i));
    return reply;
  }

  /** Logs in: opens a session for `peerId`, with `extra` fields (a signature's `t`, `n`, `s`, or the session
   *  token `st` of an earlier login). The connection is `ready` once the server answers `session opened`. */
  async openSession(peerId, extra = {}) {
    const reply = await this.request({ cmd: 'session', op: 'open', peerId, ...extra });
    this.ready = true;
    return reply;
  }

  send(command) { if (this.isOpen) this.socket.send(JSON.stringify(command)); }

  close() { if (this.socket) this.socket.close(); }
}
