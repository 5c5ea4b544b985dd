// Node @grpc/grpc-js-xds client for Rudder's end-to-end tests. Same protocol as grpc_peer.py's client:
// read "N [key=value ...]" lines, make N calls on one channel, print a JSON tally.
const path = require('path');
const modules = path.join(__dirname, '..', '..', 'target', 'peers', 'node', 'node_modules');
const grpc = require(path.join(modules, '@grpc', 'grpc-js'));
require(path.join(modules, '@grpc', 'grpc-js-xds')).register();
const readline = require('readline');

const client = new grpc.Client(process.argv[2], grpc.credentials.createInsecure());
const identity = (x) => x;

function call(metadata) {
  return new Promise((resolve) => {
    const deadline = new Date(Date.now() + 10000);
    client.makeUnaryRequest('/rudder.test.Echo/Who', identity, identity, Buffer.alloc(0), metadata, { deadline },
      (err, value) => resolve(err ? 'error:' + grpc.status[err.code] : value.toString()));
  });
}

const lines = readline.createInterface({ input: process.stdin });
let queue = Promise.resolve();
lines.on('line', (line) => {
  queue = queue.then(async () => {
    const parts = line.trim().split(/\s+/).filter(Boolean);
    if (parts.length === 0) return;
    const metadata = new grpc.Metadata();
    for (const kv of parts.slice(1)) {
      const [k, v] = kv.split('=');
      metadata.add(k, v);
    }
    const tally = {};
    for (let i = 0; i < Number(parts[0]); i++) {
      const key = await call(metadata);
      tally[key] = (tally[key] || 0) + 1;
    }
    process.stdout.write(JSON.stringify(tally) + '\n');
  });
});
lines.on('close', () => queue.then(() => process.exit(0)));
