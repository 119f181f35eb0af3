// The console's pure helpers, without a browser or a server: the protocol client's frames, reply matching
// and reconnection backoff (protocol.js), the poller (poller.js) and the formatting (format.js).
import { test } from 'node:test';
import assert from 'node:assert/strict';
import { PendingReplies, ProtocolError, isErrorReply, nextReconnectDelay, parseFrame, requestFrame } from '../../Sources/Console/Resources/protocol.js';
import { Poller } from '../../Sources/Console/Resources/poller.js';
import { fileNameFromUrl, formatBytes, formatClock, formatDuration, formatMillis, hueOf, plural } from '../../Sources/Console/Resources/format.js';

test('requestFrame adds the serial and keeps Chinese and emoji as they are', () => {
  const frame = requestFrame({ cmd: 'direct', cid: 'c1', msg: '你好 👋🏽' }, 7);
  assert.deepEqual(JSON.parse(frame), { cmd: 'direct', cid: 'c1', msg: '你好 👋🏽', i: 7 });
  assert.equal(JSON.parse(requestFrame({ cmd: 'echo', i: 99 }, 3)).i, 3, 'the serial wins over a stray i');
});

test('parseFrame takes JSON objects only', () => {
  assert.deepEqual(parseFrame('{"cmd":"echo","t":1}'), { cmd: 'echo', t: 1 });
  for (const data of ['', 'not json', '[1,2]', '"text"', '42', 'null', '{"cmd":']) assert.equal(parseFrame(data), null, data);
});

test('isErrorReply: error, a refused ack, session closed; not a plain ack or an event', () => {
  assert.ok(isErrorReply({ cmd: 'error', code: 4901 }));
  assert.ok(isErrorReply({ cmd: 'ack', code: 4401, reason: 'NOT_MEMBER' }));
  assert.ok(isErrorReply({ cmd: 'session', op: 'closed', code: 4111 }));
  assert.ok(!isErrorReply({ cmd: 'ack', uid: 'm1', t: 1 }));
  assert.ok(!isErrorReply({ cmd: 'session', op: 'opened' }));
  assert.ok(!isErrorReply({ cmd: 'direct', code: 5 }), 'a message event with a stray code is not an error');
});

test('PendingReplies matches replies by serial; error replies reject with the code, reason, detail and appCode', async () => {
  const pending = new PendingReplies();
  const first = pending.expect(1000);
  const second = pending.expect(1000);
  assert.deepEqual([first.i, second.i], [1, 2]);
  assert.equal(pending.size, 2);
  assert.equal(pending.settle({ cmd: 'direct', id: 'm9' }), false, 'an event without i is not a reply');
  assert.equal(pending.settle({ cmd: 'ack', i: 42 }), false, 'nor is an answer to no waiting request');
  assert.equal(pending.settle({ cmd: 'ack', i: 2, code: 4314, reason: 'MESSAGE_BLOCKED', detail: '含有链接', appCode: 17 }), true);
  assert.equal(pending.settle({ cmd: 'ack', i: 1, uid: 'm1', t: 5 }), true);
  assert.deepEqual(await first.reply, { cmd: 'ack', i: 1, uid: 'm1', t: 5 });
  await assert.rejects(second.reply, (error) => {
    assert.ok(error instanceof ProtocolError);
    assert.deepEqual([error.code, error.reason, error.detail, error.appCode], [4314, 'MESSAGE_BLOCKED', '含有链接', 17]);
    assert.equal(error.message, '4314 MESSAGE_BLOCKED: 含有链接');
    return true;
  });
  assert.equal(pending.size, 0);
  assert.equal(pending.settle({ cmd: 'ack', i: 1 }), false, 'a reply settles its request once');
});

test('PendingReplies: a request without a reply times out, and failAll rejects the rest', async () => {
  const pending = new PendingReplies();
  const late = pending.expect(20);
  await assert.rejects(late.reply, /did not answer in time/);
  assert.equal(pending.size, 0);
  const a = pending.expect(10000);
  const b = pending.expect(10000);
  pending.failAll(new Error('The connection was closed.'));
  await assert.rejects(a.reply, /closed/);
  await assert.rejects(b.reply, /closed/);
  assert.equal(pending.size, 0);
});

test('reconnection waits 1, 2, 4 … seconds, at most 30', () => {
  const delays = [1];
  while (delays.length < 8) delays.push(nextReconnectDelay(delays.at(-1)));
  assert.deepEqual(delays, [1, 2, 4, 8, 16, 30, 30, 30]);
  assert.equal(nextReconnectDelay(3, 5), 5);
});

test('Poller runs at once, one run at a time, coalesces now() during a run, and stops', async () => {
  let runs = 0;
  let inFlight = 0;
  let maxInFlight = 0;
  let release;
  const poller = new Poller(async () => {
    runs += 1;
    inFlight += 1;
    maxInFlight = Math.max(maxInFlight, inFlight);
    if (runs === 1) await new Promise((resolve) => { release = resolve; });
    inFlight -= 1;
  }, 60000);
  poller.start();
  assert.equal(runs, 1, 'the first run starts at once');
  poller.now();
  poller.now();
  assert.equal(runs, 1, 'no second run while the first is under way');
  release();
  await new Promise((resolve) => setImmediate(resolve));
  assert.equal(runs, 2, 'the requests made during the run became one more run');
  assert.equal(maxInFlight, 1);
  poller.stop();
  poller.now();
  await new Promise((resolve) => setImmediate(resolve));
  assert.equal(runs, 2, 'a stopped poller does not run');
});

test('formatting: sizes, lengths, durations, plurals, times in ms', () => {
  assert.deepEqual([formatBytes(512), formatBytes(2048), formatBytes(5 * 1024 * 1024), formatBytes(undefined)], ['512 B', '2.0 KB', '5.0 MB', '—']);
  assert.deepEqual([formatClock(5), formatClock(75), formatClock(3725)], ['0:05', '1:15', '1:02:05']);
  assert.deepEqual([formatDuration(30), formatDuration(600), formatDuration(7200), formatDuration(3 * 86400)], ['30 s', '10 min', '2 h', '3 days']);
  assert.deepEqual([plural(1, 'member'), plural(3, 'member'), plural(2, 'entry', 'entries')], ['1 member', '3 members', '2 entries']);
  assert.deepEqual([formatMillis(0), formatMillis(0.004), formatMillis(3.14159), formatMillis(42.42)], ['0', '<0.01', '3.14', '42.4']);
});

test('hueOf gives a name the same hue every time, and different names mostly different ones', () => {
  assert.equal(hueOf('小明'), hueOf('小明'));
  const hues = new Set(['tom', 'jerry', 'spike', '小明', '小红', '🐱'].map(hueOf));
  assert.ok(hues.size >= 5, `${hues.size} hues`);
  for (const hue of hues) assert.ok(hue >= 0 && hue <= 360);
});

test('fileNameFromUrl decodes the last path segment (Chinese names too)', () => {
  assert.equal(fileNameFromUrl('https://files.example/a/%E5%8D%88%E9%A5%AD.png?x=1'), '午饭.png');
  assert.equal(fileNameFromUrl('not a url'), '');
});

test('state: a session opened, a conversation selected, the list replaced, the user forgotten', async () => {
  const { chat, forgetUser, replaceConversations, selectConversation, sessionOpened, takeConnection } = await import('../../Sources/Console/Resources/state.js');
  chat.me = '小明';
  chat.room = 'room-1';
  sessionOpened({ st: 'token-1', t: Date.now() + 5000 });
  assert.equal(chat.st, 'token-1');
  assert.ok(chat.skew > 4000 && chat.skew <= 5000, `skew ${chat.skew}`);
  assert.equal(chat.room, null, 'a new session is in no chat room');

  chat.conversations = new Map([['c1', { id: 'c1' }], ['c2', { id: 'c2' }]]);
  chat.unread.set('c2', 3);
  selectConversation('c1');
  chat.online.add('小红');
  chat.roomCount = 4;
  chat.stick = false;
  selectConversation('c1');
  assert.deepEqual([...chat.online], ['小红'], 'selecting the open conversation again keeps who is online');
  selectConversation('c2');
  assert.deepEqual([chat.current, chat.online.size, chat.roomCount, chat.stick, chat.unread.has('c2')], ['c2', 0, null, true, false]);

  replaceConversations(new Map([['c1', { id: 'c1' }]]));
  assert.deepEqual([...chat.conversations.keys()], ['c1', 'c2'], 'the open conversation stays listed');

  let aborted = 0;
  chat.uploads.add({ abort: () => { aborted += 1; } });
  chat.conn = { name: 'connection' };
  assert.deepEqual(takeConnection(), { name: 'connection' });
  assert.equal(chat.conn, null);
  forgetUser();
  assert.equal(aborted, 1, 'uploads in flight are aborted');
  assert.deepEqual([chat.me, chat.st, chat.current, chat.conversations.size, chat.uploads.size, chat.reconnectDelay], [null, null, null, 0, 0, 1]);
});
