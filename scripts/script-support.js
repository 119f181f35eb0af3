// What the Node scripts (outside-bench.js, sdk-smoke.js) share: their command-line options and a free loopback port
// for the hookbot they start.
'use strict';
const net = require('net');

const args = process.argv.slice(2);

/** The value after `name` on the command line, or `fallback`. */
const option = (name, fallback) => {
  const k = args.indexOf(name);
  return k >= 0 ? args[k + 1] : fallback;
};

/** A TCP port free on 127.0.0.1 right now. */
function freePort() {
  return new Promise((resolve, reject) => {
    const server = net.createServer();
    server.once('error', reject);
    server.listen(0, '127.0.0.1', () => {
      const { port } = server.address();
      server.close(() => resolve(port));
    });
  });
}

module.exports = { args, option, freePort };
