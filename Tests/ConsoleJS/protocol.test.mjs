// The console's IM protocol client (Sources/Console/Resources/protocol.js) against a real `hookbot server`
// on loopback: two members log in, talk in Chinese with emoji, acknowledge and get receipts; refused requests
// and bad frames come back with their numeric codes. Run: node --test --experimental-websocket Tests/ConsoleJS/
import { test, before, after } from 'node:test';
import assert from 'node:assert/strict';
import { ImConnection, ProtocolError } from '../../Sources/Console/Resources/protocol.js';
import { startServer } from './server.mjs';

let server;
before(async () => { server = await startServer(); });
after(async () => { await server?.stop(); });

/** A logged-in client: its connection, and the events it received, awaited one by one. */
async function login(peerId) {
  const events = [];
  const waiters = [];
  const closed = [];
  const conn = new ImConnection(server.url, (event) => {
    const index = waiters.findIndex((w) => w.match(event));
    if (index >= 0) {
      const [waiter] = waiters.splice(index, 1);
      clearTimeout(waiter.timer);
      waiter.resolve(event);
    } else events.push(event);
  }, (_, event) => closed.push(event));
  await conn.open();
  assert.equal(conn.ready, false);
  const opened = await conn.openSession(peerId);
  assert.equal(opened.op, 'opened');
  assert.equal(opened.peerId, peerId);
  assert.equal(conn.ready, true);
  /** The first event `match` accepts (one already received, or the next), within `timeout` ms. */
  const next = (match, timeout = 5000) => {
    const index = events.findIndex(match);
    if (index >= 0) return Promise.resolve(events.splice(index, 1)[0]);
    return new Promise((resolve, reject) => {
      const waiter = { match, resolve };
      waiters.push(waiter);
      waiter.timer = setTimeout(() => {
        const at = waiters.indexOf(waiter);
        if (at >= 0) { waiters.splice(at, 1); reject(new Error(`${peerId} got no such event in ${timeout} ms; got ${JSON.stringify(events)}`)); }
      }, timeout);
    });
  };
  return { conn, events, next, closed, opened };
}

test('two members log in, talk in Chinese with emoji, acknowledge and see the receipt', async () => {
  const tom = await login('tom');
  const jerry = await login('jerry');
  assert.equal(typeof tom.opened.st, 'string', 'session opened carries the session token (uploads use it)');
  assert.equal(typeof tom.opened.t, 'number', 'and the server time (the page keeps its clock skew)');

  const started = await tom.conn.request({ cmd: 'conv', op: 'start', m: ['tom', 'jerry'], name: '午饭 🍜' });
  assert.equal(started.op, 'started');
  const cid = started.cid;
  assert.ok(cid);
  await jerry.next((e) => e.cmd === 'conv' && e.cid === cid && (e.op === 'joined' || e.op === 'members-joined'));

  const text = '你好 Jerry 👋🏽 今天吃什么？寿司还是拉面 🍣🍜';
  const body = JSON.stringify({ _lctype: -1, _lctext: text });
  const ack = await tom.conn.request({ cmd: 'direct', cid, msg: body, r: true });
  assert.equal(ack.cmd, 'ack');
  assert.equal(typeof ack.uid, 'string');
  assert.equal(typeof ack.t, 'number');

  const received = await jerry.next((e) => e.cmd === 'direct' && e.id === ack.uid);
  assert.equal(received.cid, cid);
  assert.equal(received.fromPeerId, 'tom');
  assert.equal(JSON.parse(received.msg)._lctext, text, 'the text arrives unchanged, emoji and all');

  // Jerry acknowledges as the console does (one ack per conversation, no reply expected): Tom gets the receipt.
  jerry.conn.send({ cmd: 'ack', cid, ids: [received.id] });
  const receipt = await tom.next((e) => e.cmd === 'rcp' && e.id === ack.uid);
  assert.equal(receipt.from, 'jerry');
  assert.equal(receipt.cid, cid);

  // A reply in the other direction, at a human pace, with a mention.
  const reply = JSON.stringify({ _lctype: -1, _lctext: '@tom 拉面！🍜 十二点见' });
  const second = await jerry.conn.request({ cmd: 'direct', cid, msg: reply, mentionPids: ['tom'] });
  const heard = await tom.next((e) => e.cmd === 'direct' && e.id === second.uid);
  assert.deepEqual(heard.mentionPids, ['tom']);
  assert.equal(JSON.parse(heard.msg)._lctext, '@tom 拉面！🍜 十二点见');

  tom.conn.close();
  jerry.conn.close();
});

test('a refused request rejects with a ProtocolError carrying the numeric code', async () => {
  const spike = await login('spike');
  // Not a member: the server refuses the message.
  const tyke = await login('tyke');
  const started = await tyke.conn.request({ cmd: 'conv', op: 'start', m: ['tyke'] });
  await assert.rejects(spike.conn.request({ cmd: 'direct', cid: started.cid, msg: 'hello' }), (error) => {
    assert.ok(error instanceof ProtocolError);
    assert.equal(typeof error.code, 'number');
    assert.ok(error.code >= 4000 && error.code < 5000, `code ${error.code}`);
    assert.ok(error.reason, 'with the symbolic reason');
    return true;
  });
  // A field of the wrong type: 4901 with a detail naming it, answered to this request (it has `i`).
  await assert.rejects(spike.conn.request({ cmd: 'direct', cid: 42, msg: 'hello' }), (error) => {
    assert.ok(error instanceof ProtocolError);
    assert.equal(error.code, 4901);
    assert.match(error.detail, /cid/);
    assert.match(error.message, /^4901 /);
    return true;
  });
  // An unknown command: 4902.
  await assert.rejects(spike.conn.request({ cmd: 'teleport' }), (error) => error instanceof ProtocolError && error.code === 4902);
  // The connection stays usable.
  const echo = await spike.conn.request({ cmd: 'echo' });
  assert.equal(echo.cmd, 'echo');
  spike.conn.close();
  tyke.conn.close();
});

test('a login the server refuses rejects with its code and leaves the connection not ready', async () => {
  const conn = new ImConnection(server.url, () => {}, () => {});
  await conn.open();
  await assert.rejects(conn.openSession('tom:jerry'), (error) => {
    assert.ok(error instanceof ProtocolError);
    assert.ok(error.code >= 4000 && error.code < 5000, `code ${error.code}`);
    return true;
  });
  assert.equal(conn.ready, false);
  conn.close();
});

test('a frame that is not JSON gets error 4901 as an event (it has no i) and the connection stays usable', async () => {
  const butch = await login('butch');
  butch.conn.socket.send('{"cmd": "echo", i: 1'); // unquoted key, unterminated: not a JSON object
  const error = await butch.next((e) => e.cmd === 'error');
  assert.equal(error.code, 4901);
  assert.equal(error.i, undefined);
  assert.equal(butch.conn.pending.size, 0, 'no request was waiting for it');
  const echo = await butch.conn.request({ cmd: 'echo' });
  assert.equal(typeof echo.t, 'number');
  butch.conn.close();
});

test('closing fails the requests still waiting, and a closed connection refuses new ones', async () => {
  const nibbles = await login('nibbles');
  const waiting = nibbles.conn.request({ cmd: 'echo' });
  nibbles.conn.close();
  await assert.rejects(waiting, /The connection was closed/);
  assert.equal(nibbles.closed.length, 1, 'onClose was told once');
  await assert.rejects(nibbles.conn.request({ cmd: 'echo' }), /Not connected/);
});

test('opening a connection to where no server listens rejects with a readable error', async () => {
  const port = new URL(server.url).port;
  const conn = new ImConnection(`ws://127.0.0.1:${Number(port) === 1 ? 2 : 1}/ws`, () => {}, () => {});
  await assert.rejects(conn.open(), /Could not connect to ws:\/\/127\.0\.0\.1:\d+\/ws/);
  const bad = new ImConnection('not a url', () => {}, () => {});
  await assert.rejects(bad.open(), /is not a WebSocket address/);
});
