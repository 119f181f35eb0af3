#!/usr/bin/env node
// The outside harness: w1a, w1b and w3 measured by a separate client process over loopback WebSockets,
// the shape in which issue 30 compared Hookbot with Prosody and Errbot. `hookbot bench` runs its clients
// (IMClient) inside the measured process; here they are lean JSON WebSocket clients in Node, so the
// server's CPU per round trip / delivery is read from its own process (/proc/<pid>/stat) alone.
//
//   node scripts/outside-bench.js [--binary .build/release/hookbot] [--only w1a,w1b,w3,w4] [--relaxed-sync] [--quick]
//
// w1a / w1b start `hookbot run` (embedded server, bot in process, the same ping -> pong and word-filter
// plugins as `hookbot bench`); w3 and w4 (one chat room of 5,000 members, only with --only w4) start `hookbot
// server`. Prints one JSON object. Needs Node and the `ws`
// package (Debian's node-ws: `make bench-outside` installs both).
'use strict';
module.paths.push('/usr/share/nodejs');
const WebSocket = require('ws');
const { spawn } = require('child_process');
const fs = require('fs');
const os = require('os');
const path = require('path');

const { args, option, freePort } = require('./script-support.js');
const binary = path.resolve(option('--binary', '.build/release/hookbot'));
const only = option('--only', 'w1a,w1b,w3').split(',');
const relaxed = args.includes('--relaxed-sync');
const scale = args.includes('--quick') ? 0.2 : 1;
const ticksPerSecond = 100; // _SC_CLK_TCK on Linux

const pingPlugin = `return { name = "ping", on_receive = function(msg, ctx)
  local k = msg.text and msg.text:match("^ping (%d+)$")
  if k then ctx.reply("pong " .. k) end
end }
`;
const filterPlugin = `return { name = "filter", moderation = function(msg, ctx)
  if msg.text and msg.text:find("forbidden-word", 1, true) then
    return { verdict = "block", reason = "forbidden word" }
  end
end }
`;

/** CPU seconds (user + system) used so far by process `pid`. */
function cpuSeconds(pid) {
  const stat = fs.readFileSync(`/proc/${pid}/stat`, 'utf8');
  const fields = stat.slice(stat.lastIndexOf(')') + 2).split(' ');
  return (Number(fields[11]) + Number(fields[12])) / ticksPerSecond;
}

/**
 * CPU seconds used so far by each thread of process `pid`, summed per thread name without NIO's `-#k` suffix. In
 * `hookbot run`, NIO-ELT-2 is the message pipeline's writer (SQLite commits), NIO-SGLTN-1 the WebSocket event loop,
 * NIO-ELT-3 the Lua thread and `…default-qos` Swift's pool.
 */
function threadCPUSeconds(pid) {
  const byName = {};
  for (const tid of fs.readdirSync(`/proc/${pid}/task`)) {
    let stat;
    try {
      stat = fs.readFileSync(`/proc/${pid}/task/${tid}/stat`, 'utf8');
    } catch {
      continue; // the thread ended
    }
    const name = stat.slice(stat.indexOf('(') + 1, stat.lastIndexOf(')')).replace(/-#\d+$/, '');
    const fields = stat.slice(stat.lastIndexOf(')') + 2).split(' ');
    byName[name] = (byName[name] || 0) + (Number(fields[11]) + Number(fields[12])) / ticksPerSecond;
  }
  return byName;
}

const sleep = (ms) => new Promise((resolve) => setTimeout(resolve, ms));

/** A JSON client of the realtime protocol: requests with `i`, deliveries acknowledged once per turn. */
class Client {
  constructor(port, peerId) {
    this.peerId = peerId;
    this.url = `ws://127.0.0.1:${port}/ws`;
    this.serial = 0;
    this.pending = new Map();
    this.unacked = new Map();
    this.onDirect = () => {};
  }

  async open() {
    for (let attempt = 0; ; attempt++) {
      try {
        await new Promise((resolve, reject) => {
          this.ws = new WebSocket(this.url, { perMessageDeflate: false });
          this.ws.once('open', resolve);
          this.ws.once('error', reject);
        });
        break;
      } catch (error) {
        if (attempt > 100) throw error;
        await sleep(100);
      }
    }
    this.ws.on('message', (data) => this.receive(JSON.parse(data.toString())));
    const opened = await this.request({ cmd: 'session', op: 'open', peerId: this.peerId });
    if (opened.op !== 'opened') throw new Error(`${this.peerId}: login refused: ${JSON.stringify(opened)}`);
  }

  request(command) {
    const i = ++this.serial;
    this.ws.send(JSON.stringify({ ...command, i }));
    return new Promise((resolve) => this.pending.set(i, resolve));
  }

  receive(command) {
    if (command.i !== undefined && this.pending.has(command.i)) {
      const resolve = this.pending.get(command.i);
      this.pending.delete(command.i);
      resolve(command);
    } else if (command.cmd === 'direct') {
      if (command.id && !command.transient) this.acknowledgeLater(command.cid, command.id);
      this.onDirect(command);
    }
  }

  acknowledgeLater(cid, id) {
    if (this.unacked.size === 0) setImmediate(() => this.flushAcks());
    if (!this.unacked.has(cid)) this.unacked.set(cid, []);
    this.unacked.get(cid).push(id);
  }

  flushAcks() {
    for (const [cid, ids] of this.unacked) this.ws.send(JSON.stringify({ cmd: 'ack', cid, ids }));
    this.unacked.clear();
  }

  send(cid, text) {
    return this.request({ cmd: 'direct', cid, msg: JSON.stringify({ _lctype: -1, _lctext: text }) });
  }

  close() {
    this.ws.close();
  }
}

async function startHookbot(name, argsFor) {
  const dir = fs.mkdtempSync(path.join(os.tmpdir(), `outside-${name}-`));
  const port = await freePort();
  const child = spawn(binary, argsFor(dir, port), { cwd: dir, stdio: ['ignore', 'ignore', 'inherit'] });
  const exited = new Promise((resolve) => child.once('exit', resolve));
  return {
    port,
    pid: child.pid,
    async stop() {
      child.kill('SIGTERM');
      await exited;
      fs.rmSync(dir, { recursive: true, force: true });
    },
  };
}

function botHub() {
  return startHookbot('w1', (dir, port) => {
    fs.mkdirSync(path.join(dir, 'plugins'));
    fs.writeFileSync(path.join(dir, 'plugins', 'ping.lua'), pingPlugin);
    fs.writeFileSync(path.join(dir, 'plugins', 'filter.lua'), filterPlugin);
    const max = 2147483647;
    fs.writeFileSync(
      path.join(dir, 'hookbot.toml'),
      `[bot]\nclient_id = "bench-bot"\nstate = "state.sqlite"\nreply_limit = ${max}\nglobal_reply_limit = ${max}\n` +
        `sends_per_event = ${max}\n\n[plugins]\ndirectory = "plugins"\nwatch_interval_seconds = 0\n\n` +
        `[server]\nport = ${port}\ndb = "server.sqlite"\nsynchronous = "${relaxed ? 'normal' : 'full'}"\n` +
        `interception_deadline_ms = 1000\n`,
    );
    return ['run', '--config', 'hookbot.toml', '--log-level', 'error'];
  });
}

function percentile(sorted, p) {
  return sorted.length ? sorted[Math.min(sorted.length - 1, Math.floor((p / 100) * sorted.length))] : 0;
}

function latency(samples) {
  const sorted = [...samples].sort((a, b) => a - b);
  const round = (x) => Math.round(x * 1000) / 1000;
  return { p50: round(percentile(sorted, 50)), p99: round(percentile(sorted, 99)), max: round(sorted[sorted.length - 1] || 0) };
}

/** w1: `messages` pings to the bot with `inFlight` of them outstanding; the bot answers each with a pong. */
async function pingPong(messages, warmup, inFlight) {
  const hub = await botHub();
  try {
    const user = new Client(hub.port, 'bench-user');
    await user.open();
    const started = await user.request({ cmd: 'conv', op: 'start', m: ['bench-bot'] });
    if (!started.cid) throw new Error(`conv start failed: ${JSON.stringify(started)}`);
    const waiting = new Map();
    user.onDirect = (command) => {
      if (command.fromPeerId !== 'bench-bot') return;
      const text = JSON.parse(command.msg)._lctext || '';
      const k = text.startsWith('pong ') ? Number(text.slice(5)) : NaN;
      const resolve = waiting.get(k);
      if (resolve) {
        waiting.delete(k);
        resolve();
      }
    };
    const roundTrip = async (k) => {
      const start = process.hrtime.bigint();
      const pong = new Promise((resolve) => waiting.set(k, resolve));
      const ack = await user.send(started.cid, `ping ${k}`);
      if (ack.code) throw new Error(`ping ${k} refused: ${JSON.stringify(ack)}`);
      await pong;
      return Number(process.hrtime.bigint() - start) / 1e6;
    };
    const run = async (count, offset) => {
      const samples = [];
      let next = 0;
      const lane = async () => {
        while (next < count) samples.push(await roundTrip(offset + next++));
      };
      await Promise.all(Array.from({ length: Math.min(inFlight, count) }, lane));
      return samples;
    };
    await run(warmup, 1000000);
    const serverCPU = cpuSeconds(hub.pid);
    const threadCPU = threadCPUSeconds(hub.pid);
    const clientCPU = process.cpuUsage();
    const t0 = process.hrtime.bigint();
    const samples = await run(messages, 0);
    const elapsed = Number(process.hrtime.bigint() - t0) / 1e9;
    const server = cpuSeconds(hub.pid) - serverCPU;
    const threads = {};
    for (const [name, seconds] of Object.entries(threadCPUSeconds(hub.pid))) {
      const micros = Math.round(((seconds - (threadCPU[name] || 0)) / messages) * 1e6);
      if (micros > 0) threads[name] = micros;
    }
    const client = process.cpuUsage(clientCPU);
    user.close();
    return {
      messages,
      inFlight,
      repliesPerSecond: Math.round(messages / elapsed),
      latencyMs: latency(samples),
      serverCPUMicrosPerRoundTrip: Math.round((server / messages) * 1e6),
      serverThreadCPUMicrosPerRoundTrip: threads,
      clientCPUMicrosPerRoundTrip: Math.round(((client.user + client.system) / messages)),
    };
  } finally {
    await hub.stop();
  }
}

/** w3: one sender, `members` receivers in a group; 8 sends outstanding; every delivery counted. */
async function fanOut(messages, members) {
  const server = await startHookbot('w3', (dir, port) => [
    'server', '--port', String(port), '--db', path.join(dir, 'server.sqlite'), '--log-level', 'error',
    ...(relaxed ? ['--relaxed-sync'] : []),
  ]);
  try {
    const sender = new Client(server.port, 'w3-sender');
    await sender.open();
    const sentAt = new Map();
    const samples = [];
    let remaining = messages * members;
    let done;
    const finished = new Promise((resolve) => (done = resolve));
    const receivers = [];
    for (let m = 0; m < members; m++) {
      const receiver = new Client(server.port, `w3-m${m}`);
      receiver.onDirect = (command) => {
        const k = Number(JSON.parse(command.msg)._lctext);
        samples.push(Number(process.hrtime.bigint() - sentAt.get(k)) / 1e6);
        if (--remaining === 0) done();
      };
      await receiver.open();
      receivers.push(receiver);
    }
    const started = await sender.request({ cmd: 'conv', op: 'start', m: receivers.map((r) => r.peerId) });
    const serverCPU = cpuSeconds(server.pid);
    const clientCPU = process.cpuUsage();
    const t0 = process.hrtime.bigint();
    let next = 0;
    const lane = async () => {
      while (next < messages) {
        const k = next++;
        sentAt.set(k, process.hrtime.bigint());
        const ack = await sender.send(started.cid, String(k));
        if (ack.code) throw new Error(`message ${k} refused: ${JSON.stringify(ack)}`);
      }
    };
    await Promise.all(Array.from({ length: 8 }, lane));
    await finished;
    const elapsed = Number(process.hrtime.bigint() - t0) / 1e9;
    const cpu = cpuSeconds(server.pid) - serverCPU;
    const client = process.cpuUsage(clientCPU);
    for (const receiver of receivers) receiver.close();
    sender.close();
    const deliveries = messages * members;
    return {
      messages,
      members,
      deliveries,
      deliveriesPerSecond: Math.round(deliveries / elapsed),
      latencyMs: latency(samples),
      serverCPUMicrosPerDelivery: Math.round((cpu / deliveries) * 1e7) / 10,
      clientCPUMicrosPerDelivery: Math.round(((client.user + client.system) / deliveries) * 10) / 10,
    };
  } finally {
    await server.stop();
  }
}

/**
 * w4: one chat room (a transient conversation) of `members` online members, as `hookbot bench`'s w4: the speaker
 * sends `messages` messages (Chinese and ASCII) with at most 10 not yet delivered to every member; every member counts
 * what it receives, every 50th reads the send time written into the text. Members connect from 127.0.0.2-9 (no
 * address runs short of ephemeral ports) and do not acknowledge (LeanCloud's SDKs do not ack chat-room messages).
 */
async function bigRoom(messages, members) {
  const addresses = 8;
  const server = await startHookbot('w4', (dir, port) => [
    'server', '--port', String(port), '--db', path.join(dir, 'server.sqlite'), '--log-level', 'error',
    '--max-connections-per-address', String(Math.ceil(members / addresses) + 64),
    ...(relaxed ? ['--relaxed-sync'] : []),
  ]);
  const sockets = [];
  try {
    const speaker = new Client(server.port, 'w4-speaker');
    await speaker.open();
    const started = await speaker.request({ cmd: 'conv', op: 'start', transient: true, attr: { name: '大厅 lobby' } });
    if (!started.cid) throw new Error(`conv start failed: ${JSON.stringify(started)}`);
    const cid = started.cid;
    const directPrefix = Buffer.from('{"cmd":"direct"');
    const samples = [];
    let delivered = 0;
    let lastDelivery = 0n;
    let closed = 0;
    let waiter = null; // [condition, resolve] of the speaker waiting for deliveries or acks
    const progress = () => {
      if (waiter && waiter[0]()) {
        const resolve = waiter[1];
        waiter = null;
        resolve();
      }
    };
    const until = (condition) => (condition() ? Promise.resolve() : new Promise((resolve) => (waiter = [condition, resolve])));
    const join = (m) =>
      new Promise((resolve, reject) => {
        const ws = new WebSocket(`ws://127.0.0.1:${server.port}/ws`, {
          perMessageDeflate: false, localAddress: `127.0.0.${2 + (m % addresses)}`,
        });
        const sampled = m % 50 === 0;
        let joined = false;
        ws.once('error', reject);
        ws.on('close', () => {
          if (joined) closed++;
        });
        ws.once('open', () => ws.send(JSON.stringify({ cmd: 'session', op: 'open', i: 1, peerId: `w4-m${m}` })));
        ws.on('message', (data) => {
          if (joined) {
            if (data.length < directPrefix.length || data.compare(directPrefix, 0, directPrefix.length, 0, directPrefix.length) !== 0) return;
            delivered++;
            lastDelivery = process.hrtime.bigint();
            if (sampled) {
              const text = data.toString();
              const at = text.indexOf('t=');
              if (at >= 0) samples.push(Number(lastDelivery - BigInt(text.slice(at + 2).match(/^\d+/)[0])) / 1e6);
            }
            progress();
            return;
          }
          const text = data.toString();
          if (text.includes('"op":"opened"')) ws.send(JSON.stringify({ cmd: 'conv', op: 'join', i: 2, cid }));
          else if (text.includes('"op":"added"')) {
            joined = true;
            sockets.push(ws);
            resolve();
          } else if (text.includes('"cmd":"error"') || text.includes('"code"')) reject(new Error(`w4-m${m}: ${text}`));
        });
      });
    for (let m = 0; m < members; m += 200) {
      await Promise.all(Array.from({ length: Math.min(200, members - m) }, (_, k) => join(m + k)));
    }

    let acked = 0;
    const serverCPU = cpuSeconds(server.pid);
    const clientCPU = process.cpuUsage();
    const t0 = process.hrtime.bigint();
    for (let k = 0; k < messages; k++) {
      // At most 10 messages acknowledged but not yet delivered to every member (as `hookbot bench`'s w4).
      await until(() => k - acked < 10 && (k - 10) * members <= delivered);
      const text = `第${k}条 message ${k} t=${process.hrtime.bigint()}`;
      speaker.request({ cmd: 'direct', cid, msg: text }).then((ack) => {
        if (ack.code) throw new Error(`message ${k} refused: ${JSON.stringify(ack)}`);
        acked++;
        progress();
      });
    }
    const expected = messages * members;
    let seen = -1;
    let quietSince = Date.now();
    while (delivered < expected && Date.now() - quietSince < 30000) {
      await sleep(20);
      if (delivered !== seen) [seen, quietSince] = [delivered, Date.now()];
    }
    const cpu = cpuSeconds(server.pid) - serverCPU;
    const client = process.cpuUsage(clientCPU);
    const elapsed = Number(lastDelivery - t0) / 1e9;
    speaker.close();
    return {
      messages,
      members,
      deliveries: delivered,
      missing: expected - delivered,
      closedMembers: closed,
      deliveriesPerSecond: Math.round(delivered / elapsed),
      latencyMs: latency(samples),
      serverCPUMicrosPerDelivery: Math.round((cpu / Math.max(delivered, 1)) * 1e8) / 100,
      clientCPUMicrosPerDelivery: Math.round(((client.user + client.system) / Math.max(delivered, 1)) * 100) / 100,
    };
  } finally {
    for (const ws of sockets) ws.terminate();
    await server.stop();
  }
}

(async () => {
  const report = { binary, synchronous: relaxed ? 'normal' : 'full', cores: os.cpus().length };
  if (only.includes('w1a')) report.w1a = await pingPong(Math.round(2000 * scale), 200, 1);
  if (only.includes('w1b')) report.w1b = await pingPong(Math.round(10000 * scale), 200, 50);
  if (only.includes('w3')) report.w3 = await fanOut(Math.round(2000 * scale), 50);
  // w4 runs only when named (5,000 WebSockets in this process); --quick: 1,000 members, 100 messages.
  if (only.includes('w4')) report.w4 = await bigRoom(scale < 1 ? 100 : 1000, scale < 1 ? 1000 : 5000);
  console.log(JSON.stringify(report, null, 2));
})().catch((error) => {
  console.error(error);
  process.exit(1);
});
