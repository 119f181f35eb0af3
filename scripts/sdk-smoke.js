#!/usr/bin/env node
// LeanCloud's official JS realtime SDK against a `hookbot server` it starts: 19 flows an app uses (three clients on one
// connection, a unique 1:1 conversation, Chinese and emoji text, history, edit, recall, transient, read, a group with a
// custom attribute, `attr.*`, a query by attribute, mute / block lists and roles (member info over REST), quit and
// rejoin by id, @all, a chat room, a temporary conversation), each reported ok or FAIL with the SDK's error code.
//
//   node scripts/sdk-smoke.js --sdk PATH/im-browser.js [--binary .build/release/hookbot] [--no-binary]
//
// The SDK is not part of this repository: take its browser bundle from the `dist` branch of leancloud/js-realtime-sdk
// (`git show dist:dist/im-browser.js > im-browser.js`, 5.0.0-rc.7 when this was written). It runs under Node with the
// `ws` package (Debian's node-ws) as its WebSocket and Node's http as its request adapter; `--no-binary` makes it speak
// lc.proto2base64.3 instead of binary protobuf frames. Exits 1 when a flow fails.
'use strict';
module.paths.push('/usr/share/nodejs');
const { args, option, freePort } = require('./script-support.js');
const WS = require('ws');
const { spawn } = require('child_process');
const fs = require('fs'), os = require('os'), path = require('path'), net = require('net');
// The browser bundle reads a few browser globals when it loads.
global.WebSocket = WS;
global.window = global;
global.localStorage = { getItem() { return null; }, setItem() {}, removeItem() {} };
global.navigator = { userAgent: 'node' };
const AV = require(path.resolve(option('--sdk', 'im-browser.js')));
const { Realtime, TextMessage, Event, ConversationMemberRole } = AV;
const http = require('http');
const request = (url, { method = 'GET', headers = {}, data } = {}) => new Promise((resolve, reject) => {
  const body = data === undefined ? undefined : JSON.stringify(data);
  const req = http.request(url, { method, headers: { ...headers, ...(body ? { 'Content-Type': 'application/json' } : {}) } }, (res) => {
    let text = ''; res.setEncoding('utf8'); res.on('data', (c) => (text += c));
    res.on('end', () => { let parsed; try { parsed = JSON.parse(text); } catch { parsed = text; } resolve({ ok: res.statusCode < 400, status: res.statusCode, headers: res.headers, data: parsed }); });
  });
  req.on('error', reject); if (body) req.write(body); req.end();
});
AV.setAdapters({ WebSocket: WS, request });
const binary = path.resolve(option('--binary', '.build/release/hookbot'));
const noBinary = args.includes('--no-binary');
const results = [];
const check = async (name, f) => {
  try { const r = await Promise.race([f(), new Promise((_, j) => setTimeout(() => j(new Error('timeout')), 8000))]); results.push([name, r === false ? 'FAIL' : 'ok']); }
  catch (e) { results.push([name, 'FAIL ' + (e.code || '') + ' ' + (e.message || e).toString().slice(0, 120)]); }
};
const until = (emitter, event, pred = () => true) => new Promise((res) => {
  const h = (...a) => { if (pred(...a)) { emitter.off(event, h); res(a); } }; emitter.on(event, h);
});
(async () => {
  const dir = fs.mkdtempSync(path.join(os.tmpdir(), 'sdk-smoke-'));
  const port = await freePort();
  const server = spawn(binary, ['server', '--port', String(port), '--db', path.join(dir, 's.sqlite'), '--log-level', 'error'], { stdio: 'inherit' });
  for (let k = 0; k < 100; k++) { try { await new Promise((res, rej) => { const c = net.connect(port, '127.0.0.1', () => { c.end(); res(); }); c.on('error', rej); }); break; } catch { await new Promise((r) => setTimeout(r, 100)); } }
  const realtime = new Realtime({ appId: 'hookbot', appKey: 'x', server: `http://127.0.0.1:${port}`, RTMServers: `ws://127.0.0.1:${port}/ws`, noBinary });
  let tom, jerry, spike, conv, group, sent;
  await check('login Tom, Jerry, Spike (one connection)', async () => {
    tom = await realtime.createIMClient('Tom'); jerry = await realtime.createIMClient('Jerry'); spike = await realtime.createIMClient('Spike');
  });
  await check('unique 1:1 conversation', async () => { conv = await tom.createConversation({ members: ['Jerry'], name: 'Tom & Jerry', unique: true }); return !!conv.id; });
  await check('send text, Chinese and emoji, received', async () => {
    const got = until(jerry, Event.MESSAGE, (m) => m.text === '你好 Jerry 🐭');
    sent = await conv.send(new TextMessage('你好 Jerry 🐭'));
    const [m] = await got; return m.from === 'Tom' && !!sent.id && sent.timestamp instanceof Date;
  });
  await check('history', async () => { const h = await conv.queryMessages({ limit: 10 }); return h.length === 1 && h[0].text === '你好 Jerry 🐭'; });
  await check('edit (update)', async () => {
    const got = until(jerry, Event.MESSAGE_UPDATE);
    await conv.update(sent, new TextMessage('edited ✏️')); const [m] = await got; return m.text === 'edited ✏️';
  });
  await check('recall', async () => { const got = until(jerry, Event.MESSAGE_RECALL); await conv.recall(sent); await got; });
  await check('transient message', async () => {
    const got = until(jerry, Event.MESSAGE, (m) => m.text === 'typing…'); await conv.send(new TextMessage('typing…'), { transient: true }); await got;
  });
  await check('read', async () => { const jc = await jerry.getConversation(conv.id); await jc.read(); });
  await check('group with attribute', async () => {
    group = await tom.createConversation({ members: ['Jerry', 'Spike'], name: 'Cheese 🧀', topic: '猫和老鼠' });
    return group.get('topic') === '猫和老鼠';
  });
  await check('attr.* attribute set and read back', async () => {
    group.set('attr.mood', 'happy'); await group.save();
    const again = await spike.getConversation(group.id, true); return again.get('attr.mood') === 'happy';
  });
  await check('query by attribute', async () => {
    const found = await jerry.getQuery().equalTo('topic', '猫和老鼠').find(); return found.length === 1 && found[0].id === group.id;
  });
  await check('mute member, muted list, unmute', async () => {
    await group.muteMembers(['Jerry']); const { results: muted } = await group.queryMutedMembers(); await group.unmuteMembers(['Jerry']); const { results: after } = await group.queryMutedMembers(); return muted.length === 1 && muted[0] === 'Jerry' && after.length === 0;
  });
  await check('role: manager, member info', async () => {
    await group.updateMemberRole('Jerry', ConversationMemberRole.MANAGER); const info = await group.getAllMemberInfo({ noCache: true });
    return info.some((i) => i.memberId === 'Jerry' && i.role === ConversationMemberRole.MANAGER);
  });
  await check('block member, blocked list, unblock', async () => {
    await group.blockMembers(['Spike']); const { results: blocked } = await group.queryBlockedMembers(); await group.unblockMembers(['Spike']); await group.add(['Spike']); return blocked.length === 1 && blocked[0] === 'Spike';
  });
  await check('quit and rejoin by id', async () => {
    const sg = await spike.getConversation(group.id); await sg.quit(); await sg.join(); return sg.members.includes('Spike');
  });
  await check('group message to all members', async () => {
    const a = until(jerry, Event.MESSAGE, (m) => m.text === '@all 开会 📅'); const b = until(spike, Event.MESSAGE, (m) => m.text === '@all 开会 📅');
    await group.send(new TextMessage('@all 开会 📅').mentionAll()); await a; await b;
  });
  await check('chat room', async () => {
    const room = await tom.createChatRoom({ name: 'lobby' }); const jr = await jerry.getConversation(room.id); await jr.join();
    const got = until(jerry, Event.MESSAGE, (m) => m.text === 'hi room'); await room.send(new TextMessage('hi room')); await got;
  });
  await check('temporary conversation', async () => { const t = await tom.createTemporaryConversation({ members: ['Jerry'] }); return t.id.startsWith('_tmp:'); });
  await check('close clients', async () => { await tom.close(); await jerry.close(); await spike.close(); });
  for (const [n, r] of results) console.log(r.padEnd(6), n);
  console.log(JSON.stringify({ ok: results.filter((r) => r[1] === 'ok').length, fail: results.filter((r) => r[1] !== 'ok').length }));
  server.kill(); fs.rmSync(dir, { recursive: true, force: true });
  process.exit(results.every((r) => r[1] === 'ok') ? 0 : 1);
})();
