#!/usr/bin/env node
// Upstream MCP servers through toolgate, checked with the official TypeScript MCP SDK (npm
// @modelcontextprotocol/sdk 1.x, loaded from $HARNESS_DIR/node/node_modules by ./lib/sdk.mjs).
//
// tests/e2e/upstreams.sh starts four upstreams and a toolgate that serves them (ev_ stdio
// server-everything, evh_ Streamable HTTP server-everything, py_ FastMCP, rs_ rmcp), then runs
// this client after tests/e2e/upstreams_py.py. Checks:
//   tools/list     each upstream's tools are served with its prefix
//   tools/call     one tool of each upstream answers as expected, and for the HTTP upstreams exactly
//                  as the upstream answers this SDK directly (content, structuredContent, isError)
//   progress       py_count's progress reaches onprogress
//   cancellation   aborting a py_slow call (the SDK sends notifications/cancelled itself) cancels
//                  the upstream's slow() (py_slow_status counts it) and toolgate keeps serving
// Prints `PASS <check>` or `FAIL <check>: <why>` per check; exit status 0 only if all passed.
//
//   MCP_TOKEN=... node tests/e2e/upstreams_ts.mjs --url http://127.0.0.1:PORT/mcp \
//     --evh-url http://127.0.0.1:P1/mcp --py-url http://127.0.0.1:P2/mcp --rs-url http://127.0.0.1:P3/mcp
import { parseArgs } from 'node:util';

import { load, sdkVersion } from './lib/sdk.mjs';

const { values: args } = parseArgs({
  options: {
    url: { type: 'string' },
    'evh-url': { type: 'string' },
    'py-url': { type: 'string' },
    'rs-url': { type: 'string' },
    'request-timeout': { type: 'string', default: '30' },
    timeout: { type: 'string', default: '120' },
  },
});
if (!args.url || !args['evh-url'] || !args['py-url'] || !args['rs-url']) {
  console.error('usage: upstreams_ts.mjs --url TOOLGATE_MCP_URL --evh-url URL --py-url URL --rs-url URL '
    + '[--request-timeout S] [--timeout S]');
  process.exit(2);
}

const { Client } = await load('client/index.js');
const { StreamableHTTPClientTransport } = await load('client/streamableHttp.js');

const reqOpts = { timeout: Number(args['request-timeout']) * 1000 };
const sleep = (ms) => new Promise((r) => { setTimeout(r, ms); });
const PREFIXES = { ev: 'ev_', evh: 'evh_', py: 'py_', rs: 'rs_' };
let passed = 0;
let failed = 0;
class CheckFailed extends Error {}
function check(ok, message) {
  if (!ok) throw new CheckFailed(message);
}
async function step(name, body) {
  try {
    const detail = await body();
    passed += 1;
    console.log(`PASS ${name}${detail ? ` (${detail})` : ''}`);
    return true;
  } catch (e) {
    failed += 1;
    console.log(`FAIL ${name}: ${e instanceof CheckFailed ? e.message : `${e.name}: ${e.message}`}`);
    return false;
  }
}

async function connect(url, token) {
  const requestInit = token ? { headers: { Authorization: `Bearer ${token}` } } : undefined;
  const transport = new StreamableHTTPClientTransport(new URL(url), { requestInit });
  const client = new Client({ name: 'toolgate-e2e-upstreams-ts', version: sdkVersion }, { capabilities: {} });
  await client.connect(transport, reqOpts);
  return { client, transport };
}
async function close(conn) {
  if (!conn) return;
  await conn.transport.terminateSession().catch(() => {});
  await conn.client.close().catch(() => {});
}

async function listAllTools(client) {
  const tools = [];
  let cursor;
  for (let pages = 1; ; pages += 1) {
    const page = await client.listTools(cursor ? { cursor } : undefined, reqOpts);
    tools.push(...page.tools);
    cursor = page.nextCursor;
    if (!cursor) return tools;
    check(pages < 100, 'tools/list did not end within 100 pages');
  }
}

const textOf = (r) => (r.content ?? []).filter((c) => c.type === 'text').map((c) => c.text).join('');
const essence = (r) => ({ content: r.content ?? [], structuredContent: r.structuredContent ?? null, isError: Boolean(r.isError) });
const show = (v) => String(JSON.stringify(v)).slice(0, 500);

async function run() {
  const conns = [];
  try {
    const tg = await connect(args.url, process.env.MCP_TOKEN);
    conns.push(tg);
    const direct = {};
    for (const [name, key] of [['evh', 'evh-url'], ['py', 'py-url'], ['rs', 'rs-url']]) {
      direct[name] = await connect(args[key]);
      conns.push(direct[name]);
    }
    // The TS client validates structuredContent against a tool's outputSchema, which it learns
    // from tools/list: list first, on every session.
    const names = new Set((await listAllTools(tg.client)).map((t) => t.name));
    for (const d of Object.values(direct)) await listAllTools(d.client);

    await step('tools/list serves all four upstreams', async () => {
      const want = ['ev_get-sum', 'ev_echo', 'evh_echo', 'evh_get-sum', 'py_greet', 'py_count', 'py_slow', 'rs_calculate_sum'];
      const missing = want.filter((n) => !names.has(n));
      check(missing.length === 0, `missing ${missing}; listed: ${[...names].sort()}`);
      for (const prefix of Object.values(PREFIXES)) check([...names].some((n) => n.startsWith(prefix)), `no ${prefix} tools`);
      return `${names.size} tools`;
    });

    await step('ev_get-sum', async () => {
      const r = await tg.client.callTool({ name: 'ev_get-sum', arguments: { a: 19, b: 23 } }, undefined, reqOpts);
      check(!r.isError && textOf(r) === 'The sum of 19 and 23 is 42.', `ev_get-sum returned ${show(r)}`);
    });

    const sameAsDirect = (upstream, tool, toolArgs) => async () => {
      const via = essence(await tg.client.callTool({ name: PREFIXES[upstream] + tool, arguments: toolArgs }, undefined, reqOpts));
      const up = essence(await direct[upstream].client.callTool({ name: tool, arguments: toolArgs }, undefined, reqOpts));
      check(JSON.stringify(via) === JSON.stringify(up), `through toolgate ${show(via)} but directly ${show(up)}`);
      check(!via.isError, `${tool} failed: ${show(via)}`);
      return textOf(via).slice(0, 60);
    };
    await step('evh_echo same as calling the upstream directly', sameAsDirect('evh', 'echo', { message: 'from TypeScript' }));
    await step('py_greet same as calling the upstream directly', sameAsDirect('py', 'greet', { name: 'TypeScript' }));
    await step('rs_calculate_sum same as calling the upstream directly', sameAsDirect('rs', 'calculate_sum', { a: 40, b: 2 }));

    await step('progress relayed (py_count)', async () => {
      const seen = [];
      const r = await tg.client.callTool({ name: 'py_count', arguments: { n: 3, delay_ms: 50 } }, undefined,
        { ...reqOpts, onprogress: (p) => seen.push([p.progress, p.total, p.message]) });
      check(!r.isError && textOf(r) === 'counted to 3', `py_count returned ${show(r)}`);
      const want = [[1, 3, 'step 1 of 3'], [2, 3, 'step 2 of 3'], [3, 3, 'step 3 of 3']];
      check(JSON.stringify(seen) === JSON.stringify(want), `onprogress saw ${show(seen)}, the upstream sent ${show(want)}`);
      return `${seen.length} notifications`;
    });

    await step('cancellation relayed (py_slow aborted)', async () => {
      const status = async () => {
        const r = await tg.client.callTool({ name: 'py_slow_status', arguments: {} }, undefined, reqOpts);
        check(!r.isError && r.structuredContent, `py_slow_status returned ${show(r)}`);
        return r.structuredContent;
      };
      const before = await status();
      const abort = new AbortController();
      const call = tg.client
        .callTool({ name: 'py_slow', arguments: { seconds: 120 } }, undefined, { ...reqOpts, timeout: 180000, signal: abort.signal })
        .then((r) => ({ result: r }), (e) => ({ error: e }));
      let now = before;
      for (let waited = 0; now.started <= before.started && waited < 10000; waited += 250) { await sleep(250); now = await status(); }
      check(now.started > before.started, `py_slow did not start upstream within 10 s: ${show(now)}`);
      abort.abort('e2e: the client gave up');
      const outcome = await call;
      check(outcome.error, `py_slow answered although aborted: ${show(outcome.result)}`);
      const started = Date.now();
      for (let waited = 0; now.cancelled <= before.cancelled && waited < 10000; waited += 250) { await sleep(250); now = await status(); }
      check(now.cancelled > before.cancelled,
        `the upstream's slow() was not cancelled within 10 s of the abort: ${show(before)} -> ${show(now)}`);
      const r = await tg.client.callTool({ name: 'py_greet', arguments: { name: 'after abort' } }, undefined, reqOpts);
      check(textOf(r) === 'Hello, after abort!', `toolgate does not serve after the abort: ${show(r)}`);
      return `upstream cancelled after ${(Date.now() - started) / 1000} s`;
    });
  } finally {
    for (const c of conns) await close(c);
  }
}

const overall = setTimeout(() => {
  failed += 1;
  console.log(`FAIL typescript client run: took longer than ${args.timeout} s`);
  finish();
}, Number(args.timeout) * 1000);
function finish() {
  console.error(`typescript-sdk-${sdkVersion}: ${passed} passed, ${failed} failed`);
  process.exit(failed === 0 ? 0 : 1);
}
try {
  await run();
} catch (e) {
  failed += 1;
  console.log(`FAIL typescript client run: ${e instanceof CheckFailed ? e.message : `${e.name}: ${e.message}`}`);
}
clearTimeout(overall);
finish();
