#!/usr/bin/env node
// Check (a) of tests/cluster/topology.sh with the official MCP TypeScript SDK (from
// $HARNESS_DIR/node/node_modules, tests/e2e/setup.sh): one legacy (2025-11-25) session through
// the load balancer, kept for --requests requests (tools/list and tools/call echo, alternating),
// each answer checked. Every POST carries its own X-Request-Id (`<--rid-prefix>-<n>`). Prints
// one JSON line like tests/cluster/sdk_session.py; exit status 0 only if every request succeeded.
//
//   node tests/cluster/ts_session.mjs --url http://127.0.0.1:PORT/mcp --requests 24
import { parseArgs } from 'node:util';

import { load, sdkVersion } from '../e2e/lib/sdk.mjs';

const { values: args } = parseArgs({
  options: {
    url: { type: 'string' },
    requests: { type: 'string', default: '24' },
    'rid-prefix': { type: 'string', default: 'ts' },
    timeout: { type: 'string', default: '60' },
  },
});
const { Client } = await load('client/index.js');
const { StreamableHTTPClientTransport } = await load('client/streamableHttp.js');

const out = { client: `typescript-sdk-${sdkVersion}`, errors: [], requests: 0, requestIds: [], statuses: {} };
const want = Number(args.requests);
const reqOpts = { timeout: 15000 };

async function run() {
  let n = 0;
  const tagging = async (url, init = {}) => {
    const method = init.method ?? 'GET';
    const headers = new Headers(init.headers);
    if (method === 'POST') {
      n += 1;
      const rid = `${args['rid-prefix']}-${n}`;
      headers.set('X-Request-Id', rid);
      let rpc = null;
      try { rpc = JSON.parse(init.body).method ?? null; } catch { /* not named */ }
      out.requestIds.push({ rid, method: rpc });
    }
    const response = await fetch(url, { ...init, headers });
    const key = `${method} ${response.status}`;
    out.statuses[key] = (out.statuses[key] ?? 0) + 1;
    return response;
  };
  const transport = new StreamableHTTPClientTransport(new URL(args.url), {
    fetch: tagging,
    requestInit: { headers: { Authorization: `Bearer ${process.env.MCP_TOKEN}` } },
  });
  let version = null;
  const setVersion = transport.setProtocolVersion.bind(transport);
  transport.setProtocolVersion = (v) => { version = v; setVersion(v); };
  const client = new Client({ name: 'toolgate-cluster-ts', version: sdkVersion }, { capabilities: {} });
  await client.connect(transport, reqOpts);
  try {
    out.protocolVersion = version;
    if (version !== '2025-11-25') throw new Error(`negotiated ${version}, wanted 2025-11-25`);
    const sid = transport.sessionId;
    out.sessionId = sid;
    for (let i = 0; i < want; i += 1) {
      try {
        if (i % 2 === 0) {
          const page = await client.listTools(undefined, reqOpts);
          if (!page.tools.some((t) => t.name === 'echo')) throw new Error('tools/list without echo');
        } else {
          const text = `${args['rid-prefix']} #${i}`;
          const r = await client.callTool({ name: 'echo', arguments: { text } }, undefined, reqOpts);
          const got = (r.content ?? []).map((c) => c.text ?? '').join('');
          if (r.isError || got !== text) throw new Error(`echo returned ${JSON.stringify(r)}`);
        }
        out.requests += 1;
      } catch (e) {
        out.errors.push(`request ${i + 1}: ${e.name}: ${e.message}`);
        if (out.errors.length >= 3) break;
      }
    }
    if (transport.sessionId !== sid) out.errors.push(`the session id changed from ${sid} to ${transport.sessionId}`);
  } finally {
    await transport.terminateSession().catch(() => {});
    await client.close().catch(() => {});
  }
}

const overall = setTimeout(() => { out.errors.push(`the run took longer than ${args.timeout} s`); finish(); }, Number(args.timeout) * 1000);
function finish() {
  out.ok = out.errors.length === 0 && out.requests === want;
  console.log(JSON.stringify(out));
  process.exit(out.ok ? 0 : 1);
}
try {
  await run();
} catch (e) {
  out.errors.push(`${e.name}: ${e.message}`);
}
clearTimeout(overall);
finish();
