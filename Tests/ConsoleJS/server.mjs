// A real `hookbot server` on loopback for the console's JavaScript tests: the built binary on a free port
// (--port 0) with a throwaway SQLite file and media folder, started from the test and stopped in `after`.
import { spawn } from 'node:child_process';
import { mkdtempSync, rmSync, existsSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { fileURLToPath } from 'node:url';

const root = fileURLToPath(new URL('../..', import.meta.url));

/** Starts the server; resolves with { url, stop } once its log says where it listens. */
export async function startServer({ binary = process.env.HOOKBOT_BINARY || join(root, '.build', 'debug', 'hookbot') } = {}) {
  if (!existsSync(binary)) throw new Error(`${binary} is missing: build first (swift build), or set HOOKBOT_BINARY`);
  const folder = mkdtempSync(join(tmpdir(), 'hookbot-console-js-'));
  const child = spawn(binary, ['server', '--host', '127.0.0.1', '--port', '0', '--db', join(folder, 'im.sqlite'),
    '--media-dir', join(folder, 'media')], { stdio: ['ignore', 'pipe', 'pipe'] });
  let log = '';
  const exited = new Promise((done) => child.once('exit', (code, signal) => done({ code, signal })));
  const url = await new Promise((found, failed) => {
    const timer = setTimeout(() => failed(new Error(`the server did not say where it listens within 20 s:\n${log}`)), 20000);
    const read = (chunk) => {
      log += chunk;
      const match = /url=(ws:\/\/127\.0\.0\.1:\d+\/ws)/.exec(log);
      if (match) { clearTimeout(timer); found(match[1]); }
    };
    child.stdout.setEncoding('utf8').on('data', read);
    child.stderr.setEncoding('utf8').on('data', read);
    exited.then(({ code, signal }) => { clearTimeout(timer); failed(new Error(`the server exited (${code ?? signal}) before listening:\n${log}`)); });
  });
  return {
    url,
    async stop() {
      if (child.exitCode == null && child.signalCode == null) child.kill('SIGTERM');
      const timer = setTimeout(() => child.kill('SIGKILL'), 5000);
      await exited;
      clearTimeout(timer);
      rmSync(folder, { recursive: true, force: true });
    },
  };
}
