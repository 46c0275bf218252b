#!/usr/bin/env node
// Serves MCP clients' Client ID Metadata Documents over https on loopback, for
// tests/e2e/signin.sh and tests/cluster/signin.sh: the files of --dir, by name, as
// https://127.0.0.1:<port>/clients/<name>.json (application/json, Cache-Control max-age=300),
// with the certificate and key given (the scripts make a CA and a certificate for IP 127.0.0.1
// with openssl; toolgate trusts that CA through metadata_documents.ca_file).
//
//   node tests/e2e/oauth/cimd_server.mjs --dir DIR --cert cert.pem --key key.pem [--port 0]
//
// The first line on stdout is {"url": "https://127.0.0.1:N", "port": N, "pid": N}; every request is
// logged on stderr as one `[cimd] GET /clients/x.json 200 <user-agent>` line (the scripts check
// that toolgate fetched each document).
import { readFileSync } from 'node:fs';
import { createServer } from 'node:https';
import path from 'node:path';
import { parseArgs } from 'node:util';

const { values: args } = parseArgs({
  options: {
    dir: { type: 'string' },
    cert: { type: 'string' },
    key: { type: 'string' },
    port: { type: 'string', default: '0' },
  },
});
if (!args.dir || !args.cert || !args.key) {
  console.error('usage: cimd_server.mjs --dir DIR --cert CERT.pem --key KEY.pem [--port N]');
  process.exit(2);
}

const server = createServer({ cert: readFileSync(args.cert), key: readFileSync(args.key) }, (req, res) => {
  const m = /^\/clients\/([\w-]+\.json)$/.exec(new URL(req.url, 'https://127.0.0.1').pathname);
  let status = 404;
  let body = '{"error":"not found"}';
  if (req.method === 'GET' && m) {
    try {
      body = readFileSync(path.join(args.dir, m[1]), 'utf8');
      status = 200;
    } catch {
      // 404
    }
  }
  console.error(`[cimd] ${req.method} ${req.url} ${status} ${req.headers['user-agent'] ?? '-'}`);
  res.writeHead(status, { 'content-type': 'application/json', 'cache-control': 'max-age=300' });
  res.end(body);
});
server.listen(Number(args.port), '127.0.0.1', () => {
  const { port } = server.address();
  console.log(JSON.stringify({ url: `https://127.0.0.1:${port}`, port, pid: process.pid }));
});
const stop = () => server.close(() => process.exit(0));
process.on('SIGTERM', stop);
process.on('SIGINT', stop);
