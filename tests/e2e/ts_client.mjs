#!/usr/bin/env node
// End-to-end check of toolgate with the official MCP TypeScript SDK (npm @modelcontextprotocol/sdk 1.x),
// loaded from $HARNESS_DIR/node/node_modules (tests/e2e/setup.sh; default ~/.cache/toolgate-e2e).
//
//   node tests/e2e/ts_client.mjs --url http://127.0.0.1:8080/mcp --min-pages 2
//   node tests/e2e/ts_client.mjs --transport sse --url http://127.0.0.1:8080/sse
//
// Streamable HTTP: initialize (protocol version and server name), list tools following nextCursor,
// call calculate_sum and report_progress_steps (progress), then wait on the GET stream for
// notifications/tools/list_changed while a second session calls test_trigger_tool_change, and
// re-list. The legacy SSE transport: initialize, list, calculate_sum. Prints one JSON line; exit
// status 0 only if every check passed.
import { parseArgs } from 'node:util';

import { load, sdkVersion } from './lib/sdk.mjs';

const { values: args } = parseArgs({
  options: {
    url: { type: 'string' },
    transport: { type: 'string', default: 'streamable-http' },
    protocol: { type: 'string', default: '2025-11-25' },
    'server-name': { type: 'string', default: 'toolgate' },
    'min-pages': { type: 'string', default: '1' },
    trigger: { type: 'string', default: 'test_trigger_tool_change' },
    'trigger-args': { type: 'string', default: '{}' },
    'list-changed-within': { type: 'string', default: '10' },
    'request-timeout': { type: 'string', default: '30' },
    timeout: { type: 'string', default: '90' },
  },
});
if (!args.url || !['streamable-http', 'sse'].includes(args.transport)) {
  console.error('usage: ts_client.mjs --url URL [--transport streamable-http|sse] [--min-pages N] [--protocol V] '
    + '[--server-name NAME] [--trigger TOOL] [--trigger-args JSON] [--list-changed-within S] [--request-timeout S] [--timeout S]');
  process.exit(2);
}

const { Client } = await load('client/index.js');
const { StreamableHTTPClientTransport } = await load('client/streamableHttp.js');
const { SSEClientTransport } = await load('client/sse.js');
const { ToolListChangedNotificationSchema } = await load('types.js');

const out = { client: `typescript-sdk-${sdkVersion}`, transport: args.transport, passed: [], errors: [] };
const reqOpts = { timeout: Number(args['request-timeout']) * 1000 };
const sleep = (ms) => new Promise((r) => { setTimeout(r, ms); });
class CheckFailed extends Error {}
function check(ok, message) {
  if (!ok) throw new CheckFailed(message);
}

// Opens and initializes a session. `fetch` is wrapped to note the answer to the standalone GET
// stream, which the SDK opens in the background after initialization.
async function openSession(onListChanged) {
  const conn = { get: null, protocolVersion: null };
  const fetchWatching = async (url, init) => {
    const response = await fetch(url, init);
    if ((init?.method ?? 'GET') === 'GET') conn.get = { status: response.status, contentType: response.headers.get('content-type') ?? '' };
    return response;
  };
  const url = new URL(args.url);
  // MCP_TOKEN: a bearer token for a server with auth on; the SDK adds these headers to every
  // request of either transport.
  const requestInit = process.env.MCP_TOKEN ? { headers: { Authorization: `Bearer ${process.env.MCP_TOKEN}` } } : undefined;
  conn.transport = args.transport === 'sse'
    ? new SSEClientTransport(url, { fetch: fetchWatching, requestInit })
    : new StreamableHTTPClientTransport(url, { fetch: fetchWatching, requestInit });
  const setVersion = conn.transport.setProtocolVersion.bind(conn.transport);
  conn.transport.setProtocolVersion = (v) => { conn.protocolVersion = v; setVersion(v); };
  conn.client = new Client({ name: 'toolgate-e2e-ts', version: sdkVersion }, { capabilities: {} });
  if (onListChanged) conn.client.setNotificationHandler(ToolListChangedNotificationSchema, async () => onListChanged());
  await conn.client.connect(conn.transport, reqOpts);
  return conn;
}

async function close(conn) {
  if (args.transport === 'streamable-http') await conn.transport.terminateSession().catch(() => {});
  await conn.client.close().catch(() => {});
}

async function listAllTools(client) {
  const tools = [];
  const cursors = new Set();
  let cursor;
  let pages = 0;
  for (;;) {
    const page = await client.listTools(cursor ? { cursor } : undefined, reqOpts);
    pages += 1;
    tools.push(...page.tools);
    cursor = page.nextCursor;
    if (!cursor) return { tools, pages };
    check(!cursors.has(cursor), `tools/list repeated the cursor ${JSON.stringify(cursor)}`);
    check(pages < 100, 'tools/list did not end within 100 pages');
    cursors.add(cursor);
  }
}

const textOf = (r) => (r.content ?? []).filter((c) => c.type === 'text').map((c) => c.text).join('');

async function run() {
  let listChangedAt = null;
  const conn = await openSession(() => { listChangedAt ??= Date.now(); });
  try {
    out.protocolVersion = conn.protocolVersion;
    check(conn.protocolVersion === args.protocol, `negotiated protocolVersion ${JSON.stringify(conn.protocolVersion)}, wanted ${args.protocol}`);
    const serverName = conn.client.getServerVersion()?.name;
    check(serverName === args['server-name'], `serverInfo.name is ${JSON.stringify(serverName)}, wanted ${args['server-name']}`);
    out.passed.push('initialize');

    const { tools, pages } = await listAllTools(conn.client);
    const names = tools.map((t) => t.name);
    out.tools = names.length;
    out.pages = pages;
    check(new Set(names).size === names.length, `duplicate tool names: ${names.filter((n, i) => names.indexOf(n) !== i)}`);
    check(pages >= Number(args['min-pages']), `tools/list came in ${pages} page(s), wanted at least ${args['min-pages']}`);
    const bad = tools.filter((t) => t.inputSchema?.type !== 'object').map((t) => t.name);
    check(bad.length === 0, `inputSchema without type object: ${bad}`);
    out.passed.push('tools/list');

    let r = await conn.client.callTool({ name: 'calculate_sum', arguments: { a: 2, b: 3 } }, undefined, reqOpts);
    check(!r.isError && textOf(r) === '5', `calculate_sum(2, 3) returned ${JSON.stringify(r)}`);
    out.passed.push('calculate_sum');
    if (args.transport === 'sse') return;

    const progress = [];
    r = await conn.client.callTool({ name: 'report_progress_steps', arguments: { steps: 3, delay_ms: 50 } }, undefined,
      { ...reqOpts, onprogress: (p) => progress.push(p.progress) });
    out.progress = progress;
    check(!r.isError, `report_progress_steps returned ${JSON.stringify(r)}`);
    check(progress.length >= 3, `${progress.length} progress notification(s), wanted at least 3`);
    check(progress.every((p, i) => i === 0 || progress[i - 1] < p), `progress values not strictly increasing: ${progress}`);
    out.passed.push('progress');

    for (let waited = 0; !conn.get && waited < 5000; waited += 20) await sleep(20);
    check(conn.get !== null, 'the SDK opened no GET stream within 5 s');
    check(conn.get.status === 200 && conn.get.contentType.startsWith('text/event-stream'),
      `GET stream answered ${conn.get.status} ${JSON.stringify(conn.get.contentType)}`);
    check(names.includes(args.trigger), `tool ${JSON.stringify(args.trigger)} is not offered (is the conformance pack on?)`);
    const other = await openSession(null); // an independent session causes the change
    const started = Date.now();
    try {
      r = await other.client.callTool({ name: args.trigger, arguments: JSON.parse(args['trigger-args']) }, undefined, reqOpts);
      check(!r.isError, `${args.trigger} returned ${JSON.stringify(r)}`);
    } finally {
      await close(other);
    }
    const within = Number(args['list-changed-within']) * 1000;
    while (listChangedAt === null && Date.now() - started < within) await sleep(20);
    check(listChangedAt !== null, `no notifications/tools/list_changed on the GET stream within ${args['list-changed-within']} s`);
    out.listChangedAfter = (listChangedAt - started) / 1000;
    const after = new Set((await listAllTools(conn.client)).tools.map((t) => t.name));
    out.toolsChanged = { added: [...after].filter((n) => !names.includes(n)).sort(), removed: names.filter((n) => !after.has(n)).sort() };
    check(out.toolsChanged.added.length + out.toolsChanged.removed.length > 0, 'tools/list after notifications/tools/list_changed shows no change');
    out.passed.push('list_changed');
  } finally {
    await close(conn);
  }
}

const overall = setTimeout(() => { out.errors.push(`the run took longer than ${args.timeout} s`); finish(); }, Number(args.timeout) * 1000);
function finish() {
  out.ok = out.errors.length === 0;
  console.log(JSON.stringify(out));
  process.exit(out.ok ? 0 : 1);
}
try {
  await run();
} catch (e) {
  out.errors.push(e instanceof CheckFailed ? e.message : `${e.name}: ${e.message}`);
}
clearTimeout(overall);
finish();
